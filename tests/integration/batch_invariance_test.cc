// Batch invariance of whole models: a row's logits are bit-identical whether it is computed
// alone (decode), among k+1 verification rows, or beside rows of another sequence.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "io/tensor_store.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "test_device.h"

namespace specd {
namespace {

class BatchInvariance : public testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  void SetUp() override {
    std::string dir =
        std::string(SPECD_SOURCE_DIR) + "/tests/data/golden/" + std::get<0>(GetParam());
    config_ = load_model_config(dir);
    store_ = TensorStore::open_dir(dir);
    backend_ = make_backend(testing_support::test_device(), 2);
    TransformerLimits limits{kSmallBatch, kSmallBatch, 64};
    model_ = std::make_unique<Transformer>(*backend_, config_, store_, limits);
    KvCacheShape shape{config_.n_layers,       config_.n_kv_heads, config_.head_dim, 2, 64,
                       std::get<1>(GetParam())};
    kv_ = std::make_unique<KvCache>(*backend_, shape);
    for (int i = 0; i < 40; ++i) tokens_.push_back((i * 37 + 11) % config_.vocab_size);
  }

  // Logits [rows, vocab] of tokens_[begin, begin + rows) at positions begin.. in `slot`.
  std::vector<float> run(int begin, int rows, int slot) {
    std::vector<int32_t> positions(rows), slots(rows, slot);
    std::iota(positions.begin(), positions.end(), begin);
    ForwardBatch batch{rows, tokens_.data() + begin, positions.data(), slots.data()};
    Tensor logits = model_->forward(batch, *kv_);
    return testing_support::host_copy(*backend_, logits);
  }

  ModelConfig config_;
  TensorStore store_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<KvCache> kv_;
  std::vector<int32_t> tokens_;
};

TEST_P(BatchInvariance, VerifyRowsEqualDecodeRows) {
  const int prompt = 8, vocab = config_.vocab_size;
  run(0, prompt, 0);
  std::vector<float> decoded;  // one row at a time, as plain decoding does
  for (int i = 0; i < kSmallBatch; ++i) {
    std::vector<float> row = run(prompt + i, 1, 0);
    decoded.insert(decoded.end(), row.begin(), row.end());
  }
  for (int k = 1; k <= kSmallBatch; ++k) {
    std::vector<float> together = run(prompt, k, 0);  // rewrites the same cache entries
    ASSERT_EQ(std::memcmp(together.data(), decoded.data(), sizeof(float) * k * vocab), 0)
        << k << " rows differ from decoding them one by one";
  }
}

TEST_P(BatchInvariance, RowsOfAnotherSequenceDoNotChangeResults) {
  const int vocab = config_.vocab_size;
  run(0, 8, 0);
  std::vector<float> alone = run(8, 3, 0);
  // Slot 1 holds a different sequence; run its prefix, then both sequences' rows together.
  std::vector<int32_t> other = {5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45};
  std::vector<int32_t> positions(8);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int32_t> slot1(8, 1);
  ForwardBatch prefix{8, other.data(), positions.data(), slot1.data()};
  model_->forward(prefix, *kv_);
  std::vector<int32_t> mixed_tokens = {tokens_[8], other[8], tokens_[9], other[9], tokens_[10]};
  std::vector<int32_t> mixed_positions = {8, 8, 9, 9, 10};
  std::vector<int32_t> mixed_slots = {0, 1, 0, 1, 0};
  ForwardBatch mixed{5, mixed_tokens.data(), mixed_positions.data(), mixed_slots.data()};
  std::vector<float> logits = testing_support::host_copy(*backend_, model_->forward(mixed, *kv_));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(std::memcmp(logits.data() + (2 * r) * vocab, alone.data() + r * vocab,
                          sizeof(float) * vocab),
              0)
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvariance,
                         testing::Combine(testing::Values("qwen3_f32", "qwen2_untied_bf16",
                                                          "llama_linear_f16", "gemma3_f32"),
                                          testing::Values(DType::kBF16, DType::kF32)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_kv_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace specd
