// Rotary position embedding frequencies for every supported scaling, as Hugging Face computes them.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace specd {

struct RopeFrequencies {
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_factor = 1.0f;  // multiplies cos and sin (yarn)
};

RopeFrequencies compute_rope_frequencies(const ModelConfig& config);

// Fills cos/sin tables [max_positions, head_dim / 2] (host f32) for positions [0, max_positions).
void fill_rope_tables(const RopeFrequencies& freqs, int max_positions, float* cos_table,
                      float* sin_table);

}  // namespace specd
