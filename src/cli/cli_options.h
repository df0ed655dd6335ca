// Command-line options shared by the commands: model loading and sampling.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

#include "cli/model_loader.h"
#include "model/model_config.h"
#include "sample/sampling_params.h"

namespace specd::cli {

struct SamplingOptions {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  double presence_penalty = 0, frequency_penalty = 0;
  uint64_t seed = 0;

  void add_to(CLI::App& command);
  // The user's settings over the model's generation_config.json defaults (greedy unless the
  // model's defaults say do_sample).
  SamplingParams resolve(const ModelConfig& config) const;
};

// --model, --device, --threads, --kv-dtype, --ctx-size, --quantize.
void add_model_options(CLI::App& command, LoadOptions& options, std::string& kv_dtype);

// Adds `flag` (--quantize, --draft-quantize) taking none, int8 or int4 into `quant`.
void add_quantize_option(CLI::App& command, const std::string& flag, WeightQuant& quant,
                         const std::string& what);

// Accepts a number of at least `least` ("must be at least N (got X)" otherwise; CLI11's
// PositiveNumber and NonNegativeNumber name a range up to the largest double instead).
CLI::Validator at_least(double least);

// Accepts an existing model directory or GGUF file ("model directory or GGUF file does not
// exist: PATH" otherwise).
CLI::Validator existing_model_path();

}  // namespace specd::cli
