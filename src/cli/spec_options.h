// Command-line options for speculative decoding and the drafters they build.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/model_loader.h"
#include "spec/chained_drafter.h"
#include "spec/draft_length.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"

namespace specd::cli {

struct SpecOptions {
  std::string draft_dir;
  std::string mode;  // none, draft, ngram, ngram+draft; empty = draft if --draft, else none
  int draft_max = 8;
  int draft_min = 1;
  int draft_fixed = 0;
  double draft_p_min = 0.0;
  int ngram_min = 1;
  int ngram_max = 4;
  std::string draft_device;                         // empty: the target's device
  WeightQuant draft_quantize = WeightQuant::kNone;  // --draft-quantize

  // Adds the options; --spec only when `with_mode` (bench takes a list of modes instead).
  void add_to(CLI::App& command, bool with_mode = true);
  DraftLengthOptions lengths() const;
  // The mode actually used (resolves the default).
  std::string resolved_mode() const;
};

// Owns the drafters of one mode (and the draft model, when one is used).
struct Speculation {
  std::string mode = "none";
  std::unique_ptr<NgramDrafter> ngram;
  std::unique_ptr<ModelDrafter> model_drafter;
  std::unique_ptr<ChainedDrafter> chained;
  Drafter* drafter = nullptr;  // nullptr = plain decoding
};

// Loads the draft model of `options` (checked against the target first) on its device, with the
// target's context plus one small forward of rows and `slots` KV slots.
LoadedModel load_draft_model(const SpecOptions& options, const LoadOptions& target_load,
                             const ModelConfig& target, int slots = 1);

// Builds the drafters for `mode`; loads the draft model once into `draft` if needed (it is
// shared between modes). `context` is the target's context size.
Speculation make_speculation(const std::string& mode, const SpecOptions& options,
                             const LoadOptions& target_load, const ModelConfig& target,
                             std::shared_ptr<LoadedModel>* draft);

}  // namespace specd::cli
