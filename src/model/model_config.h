// Model hyper-parameters read from a Hugging Face config.json (and generation_config.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/activation.h"
#include "core/dtype.h"
#include "io/json_file.h"

namespace specd {

enum class Architecture { kLlama, kQwen2, kQwen3, kMistral, kGemma3 };

enum class RopeType { kDefault, kLinear, kLlama3, kYarn };

struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 0.0;  // 0 = derived from factor (and mscale, mscale_all_dim)
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  bool truncate = true;
  // Per-frequency divisors of the inverse frequencies, [head_dim / 2], applied after the type's
  // scaling (GGUF rope_freqs.weight: Llama 3.1 style factors precomputed by the converter).
  std::vector<float> freq_factors;
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;  // as in config.json "architectures"
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope;
  int max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;      // q/k/v projection biases (Qwen2; optional for Llama)
  bool attention_out_bias = false;  // o_proj bias (Llama attention_bias)
  bool mlp_bias = false;
  bool qk_norm = false;    // Qwen3 per-head RMSNorm of q and k
  int sliding_window = 0;  // 0 = none
  Activation hidden_act = Activation::kSilu;
  // Gemma 3. Layers with sliding_layers[l] != 0 attend to the last sliding_window positions
  // only and use RoPE base rope_local_theta (default RoPE); the others use rope_theta and rope.
  // Empty = every layer global (then a sliding_window > 0 is Mistral's, not implemented).
  std::vector<uint8_t> sliding_layers;
  double rope_local_theta = 10000.0;
  double attention_scale = 0.0;  // scores multiplier; 0 = 1 / sqrt(head_dim)
  float embed_scale = 0.0f;      // embeddings multiplied by this (Gemma: sqrt(hidden)); 0 = none
  // Gemma RMSNorm: weight (1 + w), and norms after attention and around the MLP
  // (post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm).
  bool gemma_norms = false;
  bool norms_store_plus_one = false;  // GGUF: the file stores 1 + w (llama.cpp's converter)
  DType dtype = DType::kBF16;         // torch_dtype
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  // Default sampling from generation_config.json (used when the user sets none).
  bool do_sample = false;
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;

  int q_dim() const { return n_heads * head_dim; }
  bool is_sliding(int layer) const {
    return !sliding_layers.empty() && sliding_layers[static_cast<size_t>(layer)] != 0;
  }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

// Parses config.json content; throws specd::Error naming `what` and the key on bad values.
ModelConfig parse_model_config(const Json& json, const std::string& what);
// Reads `dir`/config.json and, if present, eos/bos ids from `dir`/generation_config.json.
// `dir` may also be a GGUF file (see model/gguf_model.h).
ModelConfig load_model_config(const std::string& dir);

std::string architecture_name(Architecture arch);

}  // namespace specd
