// inv_freq for default, linear, llama3 and yarn RoPE, mirroring transformers' modeling_rope_utils,
// and GGUF's per-frequency factors.
#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace specd {

namespace {

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Dimension index at which a wavelength completes `rotations` turns over `max_pos` positions.
double yarn_correction_dim(double rotations, int dim, double base, int max_pos) {
  return (dim * std::log(max_pos / (rotations * 2 * M_PI))) / (2 * std::log(base));
}

void apply_llama3(const RopeScaling& s, std::vector<float>& inv_freq) {
  double old_len = s.original_max_position_embeddings;
  double low_wavelen = old_len / s.low_freq_factor;
  double high_wavelen = old_len / s.high_freq_factor;
  for (float& f : inv_freq) {
    float freq = f;
    float wavelen = static_cast<float>(2 * M_PI) / freq;
    float scaled = wavelen > low_wavelen ? freq / static_cast<float>(s.factor) : freq;
    bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    if (medium) {
      float smooth =
          (static_cast<float>(old_len) / wavelen - static_cast<float>(s.low_freq_factor)) /
          static_cast<float>(s.high_freq_factor - s.low_freq_factor);
      scaled = (1 - smooth) * scaled / static_cast<float>(s.factor) + smooth * scaled;
    }
    f = scaled;
  }
}

float apply_yarn(const RopeScaling& s, int dim, double base, std::vector<float>& inv_freq) {
  double attention = s.attention_factor;
  if (attention <= 0) {
    attention = (s.mscale != 0 && s.mscale_all_dim != 0)
                    ? yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim)
                    : yarn_mscale(s.factor, 1.0);
  }
  int max_pos = s.original_max_position_embeddings;
  double low = yarn_correction_dim(s.beta_fast, dim, base, max_pos);
  double high = yarn_correction_dim(s.beta_slow, dim, base, max_pos);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    float extrapolation = inv_freq[i];
    float interpolation = extrapolation / static_cast<float>(s.factor);
    float ramp = static_cast<float>((static_cast<double>(i) - low) / (high - low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    float extrapolation_factor = 1.0f - ramp;
    inv_freq[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return static_cast<float>(attention);
}

}  // namespace

RopeFrequencies compute_rope_frequencies(const ModelConfig& config) {
  int dim = config.head_dim;
  RopeFrequencies out;
  out.inv_freq.resize(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), in float32.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    float power = static_cast<float>(std::pow(config.rope_theta, static_cast<double>(exponent)));
    out.inv_freq[i] = 1.0f / power;
  }
  const RopeScaling& s = config.rope;
  switch (s.type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear:
      for (float& f : out.inv_freq) f /= static_cast<float>(s.factor);
      break;
    case RopeType::kLlama3:
      apply_llama3(s, out.inv_freq);
      break;
    case RopeType::kYarn:
      out.attention_factor = apply_yarn(s, dim, config.rope_theta, out.inv_freq);
      break;
  }
  if (!s.freq_factors.empty()) {
    SPECD_CHECK(s.freq_factors.size() == out.inv_freq.size(),
                "rope: {} frequency factors for head dimension {}", s.freq_factors.size(), dim);
    for (size_t i = 0; i < out.inv_freq.size(); ++i) out.inv_freq[i] /= s.freq_factors[i];
  }
  return out;
}

void fill_rope_tables(const RopeFrequencies& freqs, int max_positions, float* cos_table,
                      float* sin_table) {
  size_t half = freqs.inv_freq.size();
  for (int p = 0; p < max_positions; ++p) {
    for (size_t i = 0; i < half; ++i) {
      float angle = freqs.inv_freq[i] * static_cast<float>(p);  // f32 product, as transformers
      cos_table[p * half + i] =
          static_cast<float>(std::cos(static_cast<double>(angle))) * freqs.attention_factor;
      sin_table[p * half + i] =
          static_cast<float>(std::sin(static_cast<double>(angle))) * freqs.attention_factor;
    }
  }
}

}  // namespace specd
