// Writes tiny random-weight Qwen3 models (real HF layout) into a temporary directory, for tests
// that need models with a small vocabulary (exact distribution checks) or a target/draft pair.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/json_file.h"
#include "io/safetensors.h"

namespace specd::testing_support {

struct TinyShape {
  int vocab = 12;
  int hidden = 16;
  int layers = 1;
  int heads = 2;
  int kv_heads = 1;
  int head_dim = 8;
  int ffn = 32;
  float scale = 0.5f;  // weight std: larger = peakier distributions
};

// Returns the directory of a fresh model named `name` drawn with `seed`.
inline std::string write_tiny_model(const std::string& name, const TinyShape& s, uint32_t seed) {
  std::string dir = ::testing::TempDir() + "/tiny_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> storage;
  std::vector<TensorToWrite> tensors;
  auto add = [&](const std::string& tensor, std::vector<int64_t> shape, float center, float std) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    storage.emplace_back(n);
    for (float& v : storage.back()) v = center + std * normal(rng);
    tensors.push_back({tensor, DType::kF32, shape, storage.back().data()});
  };
  const int64_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  storage.reserve(64);
  add("model.embed_tokens.weight", {s.vocab, s.hidden}, 0, 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {s.hidden}, 1, 0.1f);
    add(p + "self_attn.q_proj.weight", {q, s.hidden}, 0, s.scale);
    add(p + "self_attn.k_proj.weight", {kv, s.hidden}, 0, s.scale);
    add(p + "self_attn.v_proj.weight", {kv, s.hidden}, 0, s.scale);
    add(p + "self_attn.o_proj.weight", {s.hidden, q}, 0, s.scale);
    add(p + "self_attn.q_norm.weight", {s.head_dim}, 1, 0.1f);
    add(p + "self_attn.k_norm.weight", {s.head_dim}, 1, 0.1f);
    add(p + "post_attention_layernorm.weight", {s.hidden}, 1, 0.1f);
    add(p + "mlp.gate_proj.weight", {s.ffn, s.hidden}, 0, s.scale);
    add(p + "mlp.up_proj.weight", {s.ffn, s.hidden}, 0, s.scale);
    add(p + "mlp.down_proj.weight", {s.hidden, s.ffn}, 0, s.scale);
  }
  add("model.norm.weight", {s.hidden}, 1, 0.1f);
  add("lm_head.weight", {s.vocab, s.hidden}, 0, s.scale);
  write_safetensors(dir + "/model.safetensors", tensors);
  Json config = {{"architectures", {"Qwen3ForCausalLM"}}, {"vocab_size", s.vocab},
                 {"hidden_size", s.hidden},              {"intermediate_size", s.ffn},
                 {"num_hidden_layers", s.layers},        {"num_attention_heads", s.heads},
                 {"num_key_value_heads", s.kv_heads},    {"head_dim", s.head_dim},
                 {"max_position_embeddings", 4096},      {"rms_norm_eps", 1e-6},
                 {"rope_theta", 10000.0},                {"tie_word_embeddings", false},
                 {"torch_dtype", "float32"},             {"eos_token_id", 0}};
  std::ofstream(dir + "/config.json") << config.dump();
  return dir;
}

}  // namespace specd::testing_support
