// `specd bench --concurrency N`: the prompts through the continuous-batching engine (as `specd
// serve` runs them), N sequences decoding together.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/batch_speculation.h"
#include "engine/generation.h"

namespace specd::cli {

struct ConcurrentRun {
  std::vector<GenerationResult> results;  // one per prompt, in prompt order
  double seconds = 0;                     // from the first submission to the last completion
};

// Submits every prompt at once to an engine of `concurrency` slots (more prompts than slots wait
// for a free one) and waits for all. Prompt i is sampled with seed params.seed + i.
ConcurrentRun run_concurrent(LoadedModel& target, const BatchSpeculation& speculation,
                             const SpecOptions& spec, int concurrency,
                             const std::vector<std::vector<int32_t>>& prompts, int gen_len,
                             SamplingParams params);

}  // namespace specd::cli
