// Tiny random GGUF models of each supported architecture (tests/data/gguf/tiny_*.gguf, written
// with gguf-py by tools/gguf/make_tiny_models.py) against the logits transformers computes from
// the same files: the metadata -> config mapping, the tensor names, llama's Q/K permutation,
// and every block format inside a real forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/npy.h"
#include "kv/kv_cache.h"
#include "model/gguf_model.h"
#include "model/transformer.h"

namespace specd {
namespace {

// Relative to max |logit|: f32 on both sides, different summation order.
constexpr double kTolerance = 1e-4;
const std::vector<int32_t> kIds = {1, 17, 200, 3, 99, 45, 45, 128, 7, 255, 0, 64};

class GgufArch : public testing::TestWithParam<std::string> {};

TEST_P(GgufArch, LogitsMatchTransformers) {
  const std::string dir = std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/";
  const std::string path = dir + "tiny_" + GetParam() + ".gguf";
  ModelConfig config = load_model_config(path);
  EXPECT_EQ(config.n_layers, 2);
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

INSTANTIATE_TEST_SUITE_P(Tiny, GgufArch, testing::Values("llama", "qwen2", "qwen3"));

TEST(GgufNames, MapsHuggingFaceNames) {
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.up_proj.weight"), "blk.3.ffn_up.weight");
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.self_attn.k_norm.weight"),
            "blk.0.attn_k_norm.weight");
  EXPECT_EQ(gguf_tensor_name("unknown"), "");
}

}  // namespace
}  // namespace specd
