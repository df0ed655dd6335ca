// Tiny random GGUF models of each supported architecture (tests/data/gguf/tiny_*.gguf, written
// with gguf-py by tools/gguf/make_tiny_models.py) against the logits transformers computes from
// the same files: the metadata -> config mapping, the tensor names, llama's Q/K permutation,
// every block format inside a real forward pass, and Gemma 3's sliding-window layers (window 4
// inside the 12-token sequence), norms stored as 1 + w, GELU-tanh MLP and embedding scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/npy.h"
#include "io/json_file.h"
#include "kv/kv_cache.h"
#include "model/gguf_model.h"
#include "model/transformer.h"

namespace specd {
namespace {

// Relative to max |logit|. specd rounds the activations entering block-quantised matmuls to int16
// per 32-element group, transformers multiplies in f32; these random-weight models carry large
// outliers within groups, so the error is larger than on the real models.
constexpr double kTolerance = 3e-2;  // measured: 4.4e-4 (llama3) to 1.0e-2 (gemma3)
const std::vector<int32_t> kIds = {1, 17, 200, 3, 99, 45, 45, 128, 7, 255, 0, 64};

class GgufArch : public testing::TestWithParam<std::string> {};

TEST_P(GgufArch, LogitsMatchTransformers) {
  const std::string dir = std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/";
  const std::string path = dir + "tiny_" + GetParam() + ".gguf";
  ModelConfig config = load_model_config(path);
  EXPECT_EQ(config.n_layers, GetParam() == "gemma3" ? 6 : 2);
  TensorStore store = open_gguf_store(path, config);
  auto backend = make_backend(Device{}, 2);
  const int n = static_cast<int>(kIds.size());
  NpyArray want = read_npy_f32(dir + "tiny_" + GetParam() + "_logits.npy");
  ASSERT_EQ(want.shape, (std::vector<int64_t>{n, config.vocab_size}));
  // All rows in one forward, and one row at a time (decode).
  for (int rows_per_forward : {n, 1}) {
    TransformerLimits limits;
    limits.max_rows = n;
    limits.max_logit_rows = n;
    limits.max_positions = 32;
    Transformer model(*backend, config, store, limits);
    KvCache kv(*backend, KvCacheShape{config.n_layers, config.n_kv_heads, config.head_dim, 1, 32,
                                      DType::kF32});
    std::vector<int32_t> positions(n);
    std::iota(positions.begin(), positions.end(), 0);
    double max_diff = 0, max_ref = 0;
    for (int begin = 0; begin < n; begin += rows_per_forward) {
      ForwardBatch batch{rows_per_forward, kIds.data() + begin, positions.data() + begin};
      Tensor logits = model.forward(batch, kv);
      for (int r = 0; r < rows_per_forward; ++r) {
        for (int v = 0; v < config.vocab_size; ++v) {
          double ref = want.data[static_cast<size_t>((begin + r) * config.vocab_size + v)];
          max_diff = std::max(max_diff, std::abs(logits.row<const float>(r)[v] - ref));
          max_ref = std::max(max_ref, std::abs(ref));
        }
      }
    }
    EXPECT_LT(max_diff / max_ref, kTolerance) << GetParam() << " rows " << rows_per_forward;
  }
}

// llama3: rope_freqs.weight factors; llama_linear: rope.scaling.type linear (goldens from
// transformers with the same scaling in the model config).
INSTANTIATE_TEST_SUITE_P(Tiny, GgufArch,
                         testing::Values("llama", "qwen2", "qwen3", "gemma3", "llama3",
                                         "llama_linear"));

TEST(GgufRope, ScalingFromMetadataAndFactors) {
  const std::string dir = std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/";
  ModelConfig plain = load_model_config(dir + "tiny_llama.gguf");
  EXPECT_EQ(plain.rope.type, RopeType::kDefault);
  EXPECT_TRUE(plain.rope.freq_factors.empty());
  ModelConfig linear = load_model_config(dir + "tiny_llama_linear.gguf");
  EXPECT_EQ(linear.rope.type, RopeType::kLinear);
  EXPECT_EQ(linear.rope.factor, 4.0);
  ModelConfig llama3 = load_model_config(dir + "tiny_llama3.gguf");
  ASSERT_EQ(llama3.rope.freq_factors.size(), static_cast<size_t>(llama3.head_dim / 2));
  // With an original context of 8 the highest frequency (wavelength 2 pi) is in the smoothed
  // band and the lowest is divided by the full factor (8).
  EXPECT_GT(llama3.rope.freq_factors.front(), 1.0f);
  EXPECT_LT(llama3.rope.freq_factors.front(), 8.0f);
  EXPECT_EQ(llama3.rope.freq_factors.back(), 8.0f);
}

TEST(GgufGemma3, ConfigFromMetadata) {
  ModelConfig c =
      load_model_config(std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/tiny_gemma3.gguf");
  EXPECT_EQ(c.arch, Architecture::kGemma3);
  EXPECT_EQ(c.hidden_act, Activation::kGeluTanh);
  EXPECT_TRUE(c.gemma_norms && c.norms_store_plus_one && c.qk_norm && c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.sliding_window, 4);
  EXPECT_EQ(c.sliding_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_theta, 1e4);
  EXPECT_EQ(c.embed_scale, 16.0f);
  EXPECT_EQ(c.attention_scale, 1.0 / 16);
}

// 16 greedy tokens after 6 prompt tokens, one decode row at a time, against transformers'
// argmax loop (tests/data/gguf/tiny_gemma3_greedy.json): the sliding window moves past the
// prompt while decoding.
TEST(GgufGemma3, GreedyTokensMatchTransformers) {
  const std::string dir = std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/";
  const std::string path = dir + "tiny_gemma3.gguf";
  ModelConfig config = load_model_config(path);
  TensorStore store = open_gguf_store(path, config);
  auto backend = make_backend(Device{}, 2);
  Json golden = read_json_file(dir + "tiny_gemma3_greedy.json");
  std::vector<int32_t> ids = golden["prompt"].get<std::vector<int32_t>>();
  const auto want = golden["tokens"].get<std::vector<int32_t>>();
  TransformerLimits limits;
  limits.max_rows = 16;
  limits.max_logit_rows = 1;
  limits.max_positions = 32;
  Transformer model(*backend, config, store, limits);
  KvCache kv(*backend,
             KvCacheShape{config.n_layers, config.n_kv_heads, config.head_dim, 1, 32, DType::kF32});
  std::vector<int32_t> positions(32);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int32_t> got;
  int32_t last_row = static_cast<int32_t>(ids.size()) - 1;
  ForwardBatch batch{static_cast<int>(ids.size()), ids.data(), positions.data()};
  batch.logit_rows = &last_row;
  batch.n_logit_rows = 1;
  for (size_t step = 0; step < want.size(); ++step) {
    const float* logits = model.forward(batch, kv).row<const float>(0);
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits, logits + config.vocab_size) - logits);
    got.push_back(next);
    ids.push_back(next);
    last_row = 0;
    batch = ForwardBatch{1, &ids.back(), positions.data() + ids.size() - 1};
    batch.logit_rows = &last_row;
    batch.n_logit_rows = 1;
  }
  EXPECT_EQ(got, want);
}

TEST(GgufNames, MapsHuggingFaceNames) {
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.up_proj.weight"), "blk.3.ffn_up.weight");
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.self_attn.k_norm.weight"), "blk.0.attn_k_norm.weight");
  EXPECT_EQ(gguf_tensor_name("unknown"), "");
  EXPECT_EQ(gguf_tensor_name("model.layers.2.post_attention_layernorm.weight"),
            "blk.2.ffn_norm.weight");
  EXPECT_EQ(
      gguf_tensor_name("model.layers.2.post_attention_layernorm.weight", Architecture::kGemma3),
      "blk.2.post_attention_norm.weight");
  EXPECT_EQ(
      gguf_tensor_name("model.layers.2.pre_feedforward_layernorm.weight", Architecture::kGemma3),
      "blk.2.ffn_norm.weight");
  EXPECT_EQ(
      gguf_tensor_name("model.layers.2.post_feedforward_layernorm.weight", Architecture::kGemma3),
      "blk.2.post_ffw_norm.weight");
}

}  // namespace
}  // namespace specd
