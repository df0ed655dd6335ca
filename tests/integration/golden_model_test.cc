// Whole models against Hugging Face transformers: logits, hidden states and greedy tokens of the
// committed fixtures (tests/data/golden, written by tools/golden/make_golden.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/npy.h"
#include "engine/generator.h"
#include "io/json_file.h"
#include "io/tensor_store.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "test_device.h"

namespace specd {
namespace {

// Max |a - b| over max |b|: the error relative to the scale of the reference.
constexpr double kTolerance = 1e-4;
// The CUDA prefill GEMM multiplies a bf16 copy of the activations (as bf16 inference does).
constexpr double kPrefillToleranceGpu = 2e-2;
// The CUDA small-batch kernels for weights other than bf16.
constexpr double kSmallToleranceGpu = 1e-3;
// bf16 weights multiply activations rounded to bf16, on the CPU (CpuBackend::Bf16Path) and in
// the CUDA small-batch kernels.
constexpr double kBf16Tolerance = 2e-2;

double relative_error(const float* a, const float* b, size_t n) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(b[i])));
  }
  return max_diff / max_ref;
}

std::vector<std::string> golden_cases() {
  std::vector<std::string> cases;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(SPECD_SOURCE_DIR) + "/tests/data/golden")) {
    if (entry.is_directory()) cases.push_back(entry.path().filename().string());
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

class GoldenModel : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::string(SPECD_SOURCE_DIR) + "/tests/data/golden/" + GetParam();
    golden_ = read_json_file(dir_ + "/golden.json");
    // Shipped models keep their weights elsewhere; the golden files stay here.
    model_dir_ = golden_.contains("model_dir")
                     ? std::string(SPECD_SOURCE_DIR) + "/" + golden_["model_dir"].get<std::string>()
                     : dir_;
    config_ = load_model_config(model_dir_);
    store_ = TensorStore::open_dir(model_dir_);
    backend_ = make_backend(testing_support::test_device(), 2);
    ids_ = golden_["token_ids"].get<std::vector<int32_t>>();
  }

  std::unique_ptr<Transformer> make_model(int max_rows, int max_logit_rows) {
    TransformerLimits limits;
    limits.max_rows = max_rows;
    limits.max_logit_rows = max_logit_rows;
    limits.max_positions = 64;
    return std::make_unique<Transformer>(*backend_, config_, store_, limits);
  }

  // The CPU tolerance: bf16 checkpoints multiply bf16-rounded activations.
  double cpu_tolerance() const {
    return config_.dtype == DType::kBF16 ? kBf16Tolerance : kTolerance;
  }
  double small_batch_tolerance() const {
    if (testing_support::on_cpu()) return cpu_tolerance();
    return config_.dtype == DType::kBF16 ? kBf16Tolerance : kSmallToleranceGpu;
  }

  std::vector<float> host(const Tensor& t) { return testing_support::host_copy(*backend_, t); }

  std::unique_ptr<KvCache> make_cache(DType dtype) {
    KvCacheShape shape{config_.n_layers, config_.n_kv_heads, config_.head_dim, 1, 64, dtype};
    return std::make_unique<KvCache>(*backend_, shape);
  }

  std::string dir_, model_dir_;
  Json golden_;
  ModelConfig config_;
  TensorStore store_;
  std::unique_ptr<Backend> backend_;
  std::vector<int32_t> ids_;
};

// All rows in one forward (the prefill GEMM path when there are more than 16 rows).
TEST_P(GoldenModel, LogitsAndHiddenStatesMatchTransformers) {
  const int n = static_cast<int>(ids_.size());
  auto model = make_model(n, n);
  std::vector<int> layers(config_.n_layers + 1);
  std::iota(layers.begin(), layers.end(), 0);
  model->set_hidden_capture(layers);
  auto kv = make_cache(DType::kF32);
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  ForwardBatch batch{n, ids_.data(), positions.data()};
  Tensor logits = model->forward(batch, *kv);

  NpyArray expected = read_npy_f32(dir_ + "/logits.npy");
  ASSERT_EQ(expected.shape, (std::vector<int64_t>{n, config_.vocab_size}));
  const double tolerance = testing_support::on_cpu() ? cpu_tolerance() : kPrefillToleranceGpu;
  double err = relative_error(host(logits).data(), expected.data.data(), expected.data.size());
  EXPECT_LT(err, tolerance) << "logits";

  NpyArray hidden = read_npy_f32(dir_ + "/hidden_states.npy");  // [layers + 1, n, hidden]
  const size_t per_layer = static_cast<size_t>(n) * config_.hidden_size;
  for (int l = 0; l < config_.n_layers; ++l) {
    double e = relative_error(host(model->hidden(l)).data(), hidden.data.data() + l * per_layer,
                              per_layer);
    EXPECT_LT(e, tolerance) << "hidden state " << l;
  }
  NpyArray last = read_npy_f32(dir_ + "/last_layer_prenorm.npy");
  EXPECT_LT(
      relative_error(host(model->hidden(config_.n_layers)).data(), last.data.data(), per_layer),
      tolerance)
      << "last layer (before the final norm)";
}

// Chunks of at most 16 rows: the batch-invariant decode/verify kernels.
TEST_P(GoldenModel, SmallBatchLogitsMatchTransformers) {
  const int n = static_cast<int>(ids_.size());
  auto model = make_model(kSmallBatch, kSmallBatch);
  auto kv = make_cache(DType::kF32);
  NpyArray expected = read_npy_f32(dir_ + "/logits.npy");
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  const int vocab = config_.vocab_size;
  for (int begin = 0; begin < n; begin += 5) {  // uneven chunks: 5 rows, then the rest
    int rows = std::min(5, n - begin);
    ForwardBatch batch{rows, ids_.data() + begin, positions.data() + begin};
    Tensor logits = model->forward(batch, *kv);
    double err = relative_error(host(logits).data(),
                                expected.data.data() + static_cast<size_t>(begin) * vocab,
                                static_cast<size_t>(rows) * vocab);
    EXPECT_LT(err, small_batch_tolerance()) << "rows " << begin << ".." << begin + rows;
  }
}

TEST_P(GoldenModel, GreedyTokensMatchTransformers) {
  auto model = make_model(32, kSmallBatch);
  auto kv = make_cache(DType::kF32);
  Generator generator(*model, *kv);
  GenerateRequest request;
  const int prompt_len = golden_["prompt_len"].get<int>();
  request.prompt.assign(ids_.begin(), ids_.begin() + prompt_len);
  request.max_tokens = 16;
  request.sampling.temperature = 0;
  GenerationResult result = generator.generate(request);
  EXPECT_EQ(result.tokens, golden_["greedy_tokens"].get<std::vector<int32_t>>());
  EXPECT_EQ(result.finish_reason, "length");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenModel, testing::ValuesIn(golden_cases()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace specd
