// Load-time quantisation on the shipped pycoder models (SPECD_TEST_DEVICE, default cpu):
// perplexity orders bf16 <= int8 <= int4 with a bounded cost, and greedy speculative decoding
// with a quantised target (and draft) emits exactly the tokens of plain decoding with it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "engine/generator.h"
#include "io/json_file.h"
#include "spec/model_drafter.h"
#include "test_model.h"

namespace specd {
namespace {

using testing_support::TestModel;

const std::string kRoot = SPECD_SOURCE_DIR;
const std::string kTarget = kRoot + "/models/pycoder-target";
const std::string kDraft = kRoot + "/models/pycoder-draft";
constexpr int kWindow = 512;

std::vector<std::vector<int32_t>> eval_prompts(int count) {
  std::ifstream in(kRoot + "/bench/prompts/pycoder_eval.jsonl");
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (std::getline(in, line) && static_cast<int>(prompts.size()) < count) {
    prompts.push_back(parse_json(line, "eval prompt")["prompt_ids"].get<std::vector<int32_t>>());
  }
  return prompts;
}

// Mean negative log-likelihood of `ids` (one window), 16 rows per forward (the decode kernels),
// as `specd perplexity` computes it.
double mean_nll(TestModel& m, const std::vector<int32_t>& ids) {
  const int vocab = m.config.vocab_size;
  std::vector<int32_t> positions(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) positions[i] = static_cast<int32_t>(i);
  std::vector<float> logits(static_cast<size_t>(kSmallBatch) * vocab);
  double nll = 0;
  int scored = 0;
  for (size_t begin = 0; begin + 1 < ids.size(); begin += kSmallBatch) {
    ForwardBatch batch;
    batch.n_rows = static_cast<int>(std::min<size_t>(kSmallBatch, ids.size() - begin));
    batch.tokens = ids.data() + begin;
    batch.positions = positions.data() + begin;
    Tensor out = m.model->forward(batch, *m.kv);
    m.backend->copy_to_host(logits.data(), out.data, out.bytes());
    for (int r = 0; r < batch.n_rows && begin + r + 1 < ids.size(); ++r) {
      const float* row = logits.data() + static_cast<size_t>(r) * vocab;
      double top = row[0], sum = 0;
      for (int i = 1; i < vocab; ++i) top = std::max(top, static_cast<double>(row[i]));
      for (int i = 0; i < vocab; ++i) sum += std::exp(row[i] - top);
      nll -= row[ids[begin + r + 1]] - top - std::log(sum);
      ++scored;
    }
  }
  return nll / scored;
}

TEST(QuantizedModel, PerplexityOrdersBf16Int8Int4) {
  std::vector<int32_t> ids;
  for (const auto& prompt : eval_prompts(8)) {
    ids.insert(ids.end(), prompt.begin(), prompt.end());
    if (ids.size() >= static_cast<size_t>(kWindow)) break;
  }
  ids.resize(std::min<size_t>(ids.size(), kWindow));
  ASSERT_GE(ids.size(), 256u);
  double nll[3];
  const WeightQuant modes[] = {WeightQuant::kNone, WeightQuant::kInt8, WeightQuant::kInt4};
  for (int i = 0; i < 3; ++i) {
    TestModel m(kTarget, kWindow, DType::kBF16, 2, 64, modes[i]);
    // 10 layers x 7 linear weights + the tied head; every input dimension is a multiple of 128.
    EXPECT_EQ(m.model->weights().quantized_tensors, i == 0 ? 0 : 71);
    nll[i] = mean_nll(m, ids);
  }
  const double ppl[3] = {std::exp(nll[0]), std::exp(nll[1]), std::exp(nll[2])};
  RecordProperty("perplexity_bf16", std::to_string(ppl[0]));
  RecordProperty("perplexity_int8", std::to_string(ppl[1]));
  RecordProperty("perplexity_int4", std::to_string(ppl[2]));
  std::printf("perplexity over %zu tokens: bf16 %.4f, int8 %.4f, int4 %.4f\n", ids.size(), ppl[0],
              ppl[1], ppl[2]);
  EXPECT_NE(nll[0], nll[1]) << "int8 weights changed nothing";
  // Ordering with a little slack (a quantised model may be luckier on a few hundred tokens).
  EXPECT_LE(ppl[0], ppl[1] * 1.002);
  EXPECT_LE(ppl[1], ppl[2] * 1.002);
  // The cost stays bounded: int8 is nearly free, int4 g128 about a tenth on this small model.
  EXPECT_LE(ppl[1], ppl[0] * 1.01);
  EXPECT_LE(ppl[2], ppl[0] * 1.2);
}

TEST(QuantizedModel, SpeculativeEqualsPlainWithQuantizedTarget) {
  for (WeightQuant mode : {WeightQuant::kInt8, WeightQuant::kInt4}) {
    TestModel target(kTarget, 1024, DType::kBF16, 2, 64, mode);
    TestModel draft(kDraft, 1024, DType::kBF16, 2, 64, WeightQuant::kInt4);
    ModelDrafter drafter(*draft.model, *draft.kv, target.config.vocab_size, 8, 0.0);
    Generator plain(*target.model, *target.kv);
    Generator spec(*target.model, *target.kv, &drafter, DraftLengthOptions{1, 8, 4});
    double tokens = 0, rounds = 0;
    for (const auto& prompt : eval_prompts(6)) {
      GenerateRequest request;
      request.prompt = prompt;
      request.max_tokens = 96;
      std::vector<int32_t> expected = plain.generate(request).tokens;
      GenerationResult result = spec.generate(request);
      ASSERT_EQ(result.tokens, expected) << weight_quant_name(mode);
      tokens += result.stats.generated_tokens - 1;
      rounds += result.stats.rounds;
    }
    EXPECT_GT(tokens / rounds, 1.5) << "drafts of the quantised pair are still accepted";
  }
}

}  // namespace
}  // namespace specd
