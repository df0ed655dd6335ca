// Speculative decoding is lossless: at T = 0 every mode and draft length emits exactly the
// plain-decoding tokens; caches after rejections equal a plain run's; edge cases end correctly.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "engine/generator.h"
#include "io/tensor_store.h"
#include "spec/chained_drafter.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"
#include "test_model.h"

namespace specd {
namespace {

const std::string kGolden = std::string(SPECD_SOURCE_DIR) + "/tests/data/golden/";
constexpr int kCapacity = 320;

// Target and draft models on one thread, bf16 KV cache.
struct Loaded : testing_support::TestModel {
  explicit Loaded(const std::string& dir, int capacity = kCapacity) : TestModel(dir, capacity) {}
};

std::vector<std::vector<int32_t>> make_prompts(int count, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> p(4 + rng() % 21);
    for (auto& t : p) t = static_cast<int32_t>(rng() % vocab);
    if (i % 3 == 0) p.insert(p.end(), p.begin(), p.end());  // repetition for the n-gram drafter
    prompts.push_back(p);
  }
  return prompts;
}

struct Mode {
  std::string name;
  bool ngram, model;
  DraftLengthOptions lengths;
};

std::vector<Mode> all_modes() {
  std::vector<Mode> modes;
  for (auto [name, ngram, model] :
       {std::tuple{"ngram", true, false}, {"draft", false, true}, {"ngram+draft", true, true}}) {
    for (int k : {1, 2, 4, 8}) modes.push_back({name, ngram, model, {1, 8, k}});
    modes.push_back({name, ngram, model, {1, 8, 0}});  // adaptive
  }
  return modes;
}

class Lossless : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Lossless, GreedyOutputEqualsPlainDecoding) {
  auto [target_name, draft_name] = GetParam();
  Loaded target(kGolden + target_name), draft(kGolden + draft_name, kCapacity + kSmallBatch);
  const int vocab = target.config.vocab_size;
  NgramDrafter ngram(1, 4);
  ModelDrafter model_drafter(*draft.model, *draft.kv, vocab, 8, 0.0);
  ChainedDrafter chained({&ngram, &model_drafter});
  Generator plain(*target.model, *target.kv);
  int rounds = 0, tokens = 0;
  for (const auto& prompt : make_prompts(20, vocab, 11)) {
    GenerateRequest request{prompt, 256, {}, {}};
    std::vector<int32_t> expected = plain.generate(request).tokens;
    ASSERT_EQ(expected.size(), 256u);
    for (const Mode& mode : all_modes()) {
      Drafter* drafter = mode.ngram && mode.model ? static_cast<Drafter*>(&chained)
                         : mode.ngram             ? static_cast<Drafter*>(&ngram)
                                                  : static_cast<Drafter*>(&model_drafter);
      Generator spec(*target.model, *target.kv, drafter, mode.lengths);
      GenerationResult result = spec.generate(request);
      ASSERT_EQ(result.tokens, expected)
          << mode.name << " k=" << mode.lengths.fixed_k << " prompt of " << prompt.size();
      rounds += result.stats.rounds;
      tokens += result.stats.generated_tokens - 1;
    }
  }
  EXPECT_LT(rounds, tokens);  // drafts were accepted at all
}

INSTANTIATE_TEST_SUITE_P(Pairs, Lossless,
                         testing::Values(std::tuple{"qwen3_f32", "llama_gqa_f32"},  // a far draft
                                         std::tuple{"qwen3_f32", "qwen3_f32"},  // a perfect draft
                                         std::tuple{"qwen2_untied_bf16", "qwen3_sharded_bf16"}),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_with_" + std::get<1>(info.param);
                         });

TEST(SpeculativeCaches, EqualAPlainRunAfterRejections) {
  Loaded target(kGolden + "qwen3_f32"), draft(kGolden + "llama_gqa_f32", kCapacity + kSmallBatch);
  Loaded plain_target(kGolden + "qwen3_f32"), plain_draft(kGolden + "llama_gqa_f32");
  ModelDrafter drafter(*draft.model, *draft.kv, target.config.vocab_size, 8, 0.0);
  GenerateRequest request{make_prompts(1, 256, 5)[0], 100, {}, {}};
  Generator spec(*target.model, *target.kv, &drafter, DraftLengthOptions{1, 8, 4});
  GenerationResult result = spec.generate(request);
  ASSERT_LT(result.stats.accepted, result.stats.drafted) << "the test needs rejections";

  Generator plain(*plain_target.model, *plain_target.kv);
  GenerationResult plain_result = plain.generate(request);
  ASSERT_EQ(result.tokens, plain_result.tokens);
  int committed = std::min(target.kv->length(0), plain_target.kv->length(0));
  EXPECT_GE(committed, static_cast<int>(request.prompt.size() + 90));
  EXPECT_TRUE(target.cache_bytes(committed) == plain_target.cache_bytes(committed));

  // The draft cache: prefill of the prompt, then one row per token, as plain decoding does.
  std::vector<int32_t> sequence = request.prompt;
  sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
  const int draft_len = draft.kv->length(0);
  ASSERT_GT(draft_len, static_cast<int>(request.prompt.size()));
  Generator fresh(*plain_draft.model, *plain_draft.kv);
  fresh.prefill(request.prompt);
  for (int pos = static_cast<int>(request.prompt.size()); pos < draft_len; ++pos) {
    ForwardBatch row{1, &sequence[pos], &pos};
    plain_draft.model->forward(row, *plain_draft.kv);
  }
  EXPECT_TRUE(draft.cache_bytes(draft_len) == plain_draft.cache_bytes(draft_len));
}

TEST(SpeculativeEdges, StopTokenInsideAnAcceptedDraft) {
  Loaded target(kGolden + "qwen3_f32"), draft(kGolden + "qwen3_f32", kCapacity + kSmallBatch);
  ModelDrafter drafter(*draft.model, *draft.kv, 256, 8, 0.0);  // perfect draft: all accepted
  GenerateRequest request{{5, 6, 7, 8}, 64, {}, {}};
  Generator plain(*target.model, *target.kv);
  std::vector<int32_t> expected = plain.generate(request).tokens;
  // Stop at the token emitted 10th: it sits inside a draft of 8 accepted tokens.
  int32_t stop = expected[9];
  size_t first = std::find(expected.begin(), expected.end(), stop) - expected.begin();
  request.stop_tokens = {stop};
  Generator spec(*target.model, *target.kv, &drafter, DraftLengthOptions{1, 8, 8});
  std::vector<int32_t> streamed;
  GenerationResult result = spec.generate(request, [&](int32_t t) {
    streamed.push_back(t);
    return true;
  });
  EXPECT_EQ(result.finish_reason, "stop");
  EXPECT_EQ(result.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + first + 1));
  EXPECT_EQ(streamed, result.tokens);
}

TEST(SpeculativeEdges, MaxTokensAndFullContextCutDrafts) {
  Loaded target(kGolden + "qwen3_f32", 40), draft(kGolden + "qwen3_f32", 40 + kSmallBatch);
  ModelDrafter drafter(*draft.model, *draft.kv, 256, 8, 0.0);
  std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  Generator plain(*target.model, *target.kv);
  Generator spec(*target.model, *target.kv, &drafter, DraftLengthOptions{1, 8, 8});
  for (int max_tokens : {1, 2, 5, 11, 32}) {  // 32 fills the context of 40 exactly
    GenerateRequest request{prompt, max_tokens, {}, {}};
    std::vector<int32_t> expected = plain.generate(request).tokens;
    GenerationResult result = spec.generate(request);
    EXPECT_EQ(result.tokens, expected) << max_tokens;
    EXPECT_EQ(result.tokens.size(), static_cast<size_t>(max_tokens));
  }
  GenerateRequest too_long{prompt, 33, {}, {}};
  EXPECT_THROW(spec.generate(too_long), Error);
}

TEST(SpeculativeEdges, ZeroDraftLengthIsPlainDecoding) {
  Loaded target(kGolden + "qwen3_f32");
  NgramDrafter ngram;
  GenerateRequest request{{1, 2, 3, 1, 2, 3, 1, 2}, 40, {}, {}};
  Generator plain(*target.model, *target.kv);
  std::vector<int32_t> expected = plain.generate(request).tokens;
  Generator spec(*target.model, *target.kv, &ngram, DraftLengthOptions{0, 0, 0});
  GenerationResult result = spec.generate(request);
  EXPECT_EQ(result.tokens, expected);
  EXPECT_EQ(result.stats.drafted, 0);
  EXPECT_EQ(result.stats.rounds, 39);
}

// Forwards of every shape run before a request leave nothing behind; on a backend that records
// forwards (CUDA graphs), the request then records none of its own.
TEST(SpeculativeWarmUp, RecordsEveryShapeAndLeavesNoTrace) {
  Loaded target(kGolden + "qwen3_f32"), draft(kGolden + "llama_gqa_f32", kCapacity + kSmallBatch);
  const int vocab = target.config.vocab_size;
  NgramDrafter ngram(1, 4);
  ModelDrafter model_drafter(*draft.model, *draft.kv, vocab, 8, 0.0);
  ChainedDrafter chained({&ngram, &model_drafter});
  // Prompts of more than kSmallBatch + 1 tokens: shorter prompts are prefilled (target, and the
  // draft up to the last token) by small forwards, which are recorded on their second use.
  std::vector<std::vector<int32_t>> prompts = make_prompts(4, vocab, 23);
  for (auto& prompt : prompts) {
    const std::vector<int32_t> once = prompt;
    while (prompt.size() <= kSmallBatch + 1) prompt.insert(prompt.end(), once.begin(), once.end());
  }
  Generator plain(*target.model, *target.kv);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& prompt : prompts) {
    expected.push_back(plain.generate(GenerateRequest{prompt, 96, {}, {}}).tokens);
  }
  // Garbage entries in the cache (even where the backend records nothing) must not show.
  const ForwardShape shapes[] = {{64, 1}, {kSmallBatch, 0}, {9, -1}, {3, 2}, {1, -1}};
  target.model->run_shapes(shapes, *target.kv);
  EXPECT_EQ(target.kv->length(0), 0);
  EXPECT_EQ(plain.generate(GenerateRequest{prompts[0], 96, {}, {}}).tokens, expected[0]);

  Generator spec(*target.model, *target.kv, &chained, DraftLengthOptions{1, 8, 0});
  spec.warm_up();
  const int recorded = target.backend->recordings() + draft.backend->recordings();
  if (target.backend->records_forwards()) EXPECT_GT(recorded, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(spec.generate(GenerateRequest{prompts[i], 96, {}, {}}).tokens, expected[i]) << i;
  }
  EXPECT_EQ(target.backend->recordings() + draft.backend->recordings(), recorded);
}

}  // namespace
}  // namespace specd
