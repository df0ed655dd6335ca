// User-facing sampling settings.
#pragma once

#include <cstdint>

namespace specd {

struct SamplingParams {
  double temperature = 0.0;  // 0 = greedy (argmax)
  int top_k = 0;             // 0 = off
  double top_p = 1.0;        // 1 = off
  double min_p = 0.0;        // 0 = off
  double repetition_penalty = 1.0;  // HF-style: divides positive logits, multiplies negative ones
  double presence_penalty = 0.0;    // OpenAI-style, subtracted once per seen token
  double frequency_penalty = 0.0;   // OpenAI-style, subtracted per occurrence
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0; }
  bool has_penalties() const {
    return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0;
  }
};

// Throws specd::Error naming the field when a value is out of range.
void validate_sampling_params(const SamplingParams& params);

}  // namespace specd
