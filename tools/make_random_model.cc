// make_random_model: writes a random-weight model in Hugging Face format (config.json,
// generation_config.json, model.safetensors) for tests, benchmarks and the demo.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace {

using specd::DType;
using Json = nlohmann::json;

struct Shape {
  std::string architecture = "Qwen3ForCausalLM";
  int vocab = 151936, hidden = 1024, ffn = 3072, layers = 28, heads = 16, kv_heads = 8;
  int head_dim = 128;
  bool tied = true;
  double rope_theta = 1000000;
};

const std::map<std::string, Shape>& presets() {
  static const std::map<std::string, Shape> table = {
      {"qwen3-0.6b", Shape{}},
      {"qwen3-tiny", Shape{"Qwen3ForCausalLM", 4096, 256, 768, 4, 4, 2, 64, true, 1000000}},
      {"llama-3.2-1b", Shape{"LlamaForCausalLM", 128256, 2048, 8192, 16, 32, 8, 64, true, 500000}},
      {"qwen3-8b", Shape{"Qwen3ForCausalLM", 151936, 4096, 12288, 36, 32, 8, 128, false, 1000000}},
      {"llama-3.1-8b",
       Shape{"LlamaForCausalLM", 128256, 4096, 14336, 32, 32, 8, 128, false, 500000}},
  };
  return table;
}

// SplitMix64: fast, seedable, good enough for random weights.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float uniform() { return static_cast<float>(static_cast<int64_t>(next() >> 11) * 0x1p-52 - 1.0); }
};

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

Tensor make_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype, Random& rng,
                   float center, float spread) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Tensor t{name, std::move(shape), std::vector<uint8_t>(n * specd::dtype_size(dtype))};
  for (int64_t i = 0; i < n; ++i) {
    specd::store_from_f32(t.data.data(), dtype, i, center + spread * rng.uniform());
  }
  return t;
}

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  float center, spread;
};

void write_model(const Shape& s, DType dtype, const std::string& out, uint64_t seed) {
  std::filesystem::create_directories(out);
  const float w = 0.02f * std::sqrt(3.0f);  // uniform with std 0.02
  std::vector<Spec> specs;
  const int64_t q = static_cast<int64_t>(s.heads) * s.head_dim;
  const int64_t kv = static_cast<int64_t>(s.kv_heads) * s.head_dim;
  bool qwen3 = s.architecture == "Qwen3ForCausalLM";
  specs.push_back({"model.embed_tokens.weight", {s.vocab, s.hidden}, 0, w});
  for (int l = 0; l < s.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {s.hidden}, 1, 0.1f});
    specs.push_back({p + "self_attn.q_proj.weight", {q, s.hidden}, 0, w});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, s.hidden}, 0, w});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, s.hidden}, 0, w});
    specs.push_back({p + "self_attn.o_proj.weight", {s.hidden, q}, 0, w});
    if (qwen3) {
      specs.push_back({p + "self_attn.q_norm.weight", {s.head_dim}, 1, 0.1f});
      specs.push_back({p + "self_attn.k_norm.weight", {s.head_dim}, 1, 0.1f});
    }
    specs.push_back({p + "post_attention_layernorm.weight", {s.hidden}, 1, 0.1f});
    specs.push_back({p + "mlp.gate_proj.weight", {s.ffn, s.hidden}, 0, w});
    specs.push_back({p + "mlp.up_proj.weight", {s.ffn, s.hidden}, 0, w});
    specs.push_back({p + "mlp.down_proj.weight", {s.hidden, s.ffn}, 0, w});
  }
  specs.push_back({"model.norm.weight", {s.hidden}, 1, 0.1f});
  if (!s.tied) specs.push_back({"lm_head.weight", {s.vocab, s.hidden}, 0, w});

  // Each tensor has its own generator (seed, index), so threads give the same bytes.
  std::vector<Tensor> tensors(specs.size());
  std::atomic<size_t> next{0}, done{0};
  const bool terminal = isatty(fileno(stderr)) != 0;  // else one line per tenth, not per tensor
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      Random rng{seed * 0x9E3779B97F4A7C15ull + i};
      tensors[i] =
          make_tensor(specs[i].name, specs[i].shape, dtype, rng, specs[i].center, specs[i].spread);
      const size_t n = ++done;
      if (terminal || n * 10 / specs.size() != (n - 1) * 10 / specs.size()) {
        std::fprintf(stderr,
                     terminal ? "\rgenerated %zu / %zu tensors" : "generated %zu / %zu tensors\n",
                     n, specs.size());
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (terminal) std::fprintf(stderr, "\n");
  std::vector<specd::TensorToWrite> views;
  for (const auto& t : tensors) views.push_back({t.name, dtype, t.shape, t.data.data()});
  specd::write_safetensors(out + "/model.safetensors", views, {{"format", "pt"}});

  static const char* kTorchDtype[] = {"float32", "float16", "bfloat16"};
  Json config = {{"architectures", {s.architecture}},
                 {"model_type", qwen3 ? "qwen3" : "llama"},
                 {"vocab_size", s.vocab},
                 {"hidden_size", s.hidden},
                 {"intermediate_size", s.ffn},
                 {"num_hidden_layers", s.layers},
                 {"num_attention_heads", s.heads},
                 {"num_key_value_heads", s.kv_heads},
                 {"head_dim", s.head_dim},
                 {"hidden_act", "silu"},
                 {"max_position_embeddings", 40960},
                 {"rms_norm_eps", 1e-6},
                 {"rope_theta", s.rope_theta},
                 {"rope_scaling", nullptr},
                 {"tie_word_embeddings", s.tied},
                 {"attention_bias", false},
                 {"torch_dtype", kTorchDtype[static_cast<int>(dtype)]},
                 {"bos_token_id", 1},
                 {"eos_token_id", 2}};
  std::ofstream(out + "/config.json") << config.dump(2) << "\n";
  Json generation = {{"bos_token_id", 1}, {"eos_token_id", 2}, {"do_sample", false}};
  std::ofstream(out + "/generation_config.json") << generation.dump(2) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a random-weight Hugging Face model directory (for tests and benchmarks)"};
  std::string preset = "qwen3-0.6b", out, dtype_text = "bf16";
  uint64_t seed = 0;
  int layers = 0;
  std::vector<std::string> names;
  for (const auto& [name, shape] : presets()) names.push_back(name);
  app.add_option("--preset", preset, "Model shape")
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  app.add_option("-o,--out", out, "Output directory")->required();
  app.add_option("--dtype", dtype_text, "Weight dtype")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}))
      ->capture_default_str();
  app.add_option("--layers", layers, "Override the number of layers")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "Random seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    Shape shape = presets().at(preset);
    if (layers > 0) shape.layers = layers;
    DType dtype = dtype_text == "f32"   ? DType::kF32
                  : dtype_text == "f16" ? DType::kF16
                                        : DType::kBF16;
    write_model(shape, dtype, out, seed);
    std::fprintf(stderr, "wrote %s (%s, %s)\n", out.c_str(), preset.c_str(), dtype_text.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
