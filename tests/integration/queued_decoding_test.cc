// Queued plain decoding (each forward queued before the host reads the token of the one before)
// emits what waiting for every token emits, ends where it does, and leaves the same cache; draft
// tokens left on the device verify as downloaded ones do.
#include <gtest/gtest.h>

#include <random>

#include "engine/generator.h"
#include "spec/model_drafter.h"
#include "test_model.h"

namespace specd {
namespace {

using testing_support::TestModel;

const std::string kGolden = std::string(SPECD_SOURCE_DIR) + "/tests/data/golden/";
constexpr int kCapacity = 200;

std::vector<int32_t> random_prompt(std::mt19937& rng, int vocab) {
  std::vector<int32_t> prompt(3 + rng() % 30);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % vocab);
  return prompt;
}

// Runs `request` on two generators of one model, queued and waiting, and checks that tokens,
// finish reason, streamed tokens and the committed cache agree.
void expect_same_run(TestModel& m, const GenerateRequest& request, int stop_after = -1) {
  Generator queued(*m.model, *m.kv), waiting(*m.model, *m.kv);
  queued.set_queued_decoding(true);
  waiting.set_queued_decoding(false);
  std::vector<int32_t> streamed[2];
  GenerationResult results[2];
  std::vector<uint8_t> caches[2];
  int lengths[2] = {0, 0};
  for (int run = 0; run < 2; ++run) {
    std::vector<int32_t>& seen = streamed[run];
    auto on_token = [&](int32_t t) {
      seen.push_back(t);
      return stop_after < 0 || static_cast<int>(seen.size()) < stop_after;
    };
    results[run] = (run == 0 ? queued : waiting).generate(request, on_token);
    lengths[run] = m.kv->length(0);
    caches[run] = m.cache_bytes(lengths[run]);
  }
  EXPECT_EQ(results[0].tokens, results[1].tokens);
  EXPECT_EQ(results[0].finish_reason, results[1].finish_reason);
  EXPECT_EQ(streamed[0], results[0].tokens);
  EXPECT_EQ(streamed[0], streamed[1]);
  EXPECT_EQ(lengths[0], lengths[1]);
  EXPECT_TRUE(caches[0] == caches[1]);
  EXPECT_EQ(results[0].stats.generated_tokens, static_cast<int>(results[0].tokens.size()));
}

TEST(QueuedDecoding, EqualsWaitingForEachToken) {
  for (const char* name : {"qwen3_f32", "llama_gqa_f32", "qwen2_untied_bf16"}) {
    SCOPED_TRACE(name);
    TestModel m(kGolden + name, kCapacity);
    std::mt19937 rng(7);
    for (int i = 0; i < 6; ++i) {
      expect_same_run(m, GenerateRequest{random_prompt(rng, m.config.vocab_size), 128, {}, {}});
    }
  }
}

TEST(QueuedDecoding, StopsWhereWaitingStops) {
  TestModel m(kGolden + "qwen3_f32", kCapacity);
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = random_prompt(rng, m.config.vocab_size);
  Generator plain(*m.model, *m.kv);
  plain.set_queued_decoding(false);
  const std::vector<int32_t> expected = plain.generate(GenerateRequest{prompt, 64, {}, {}}).tokens;
  ASSERT_EQ(expected.size(), 64u);
  for (int at : {0, 1, 5, 40}) {  // a stop token first emitted at index `at`
    SCOPED_TRACE(at);
    const int32_t stop = expected[at];
    const auto first = std::find(expected.begin(), expected.end(), stop) - expected.begin();
    GenerateRequest request{prompt, 64, {}, {stop}};
    expect_same_run(m, request);
    Generator queued(*m.model, *m.kv);
    queued.set_queued_decoding(true);
    GenerationResult result = queued.generate(request);
    EXPECT_EQ(result.finish_reason, "stop");
    EXPECT_EQ(result.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + first + 1));
  }
  for (int max_tokens : {1, 2, 3, 17})
    expect_same_run(m, GenerateRequest{prompt, max_tokens, {}, {}});
  for (int stop_after : {1, 2, 9})
    expect_same_run(m, GenerateRequest{prompt, 64, {}, {}}, stop_after);
}

// A request after one that stopped early (its last queued forward wrote a cache entry past the
// committed length) gets the tokens of a fresh generator.
TEST(QueuedDecoding, NextRequestIsUnaffectedByAnUnusedForward) {
  TestModel m(kGolden + "qwen3_f32", kCapacity), fresh(kGolden + "qwen3_f32", kCapacity);
  std::mt19937 rng(5);
  const std::vector<int32_t> first = random_prompt(rng, m.config.vocab_size);
  const std::vector<int32_t> second = random_prompt(rng, m.config.vocab_size);
  Generator queued(*m.model, *m.kv);
  queued.set_queued_decoding(true);
  int seen = 0;
  queued.generate(GenerateRequest{first, 64, {}, {}}, [&](int32_t) { return ++seen < 10; });
  EXPECT_EQ(seen, 10);
  Generator reference(*fresh.model, *fresh.kv);
  reference.set_queued_decoding(false);
  EXPECT_EQ(queued.generate(GenerateRequest{second, 48, {}, {}}).tokens,
            reference.generate(GenerateRequest{second, 48, {}, {}}).tokens);
}

// A draft model's device-chosen steps feed each other on the device: its proposals equal those
// of the draft decoding plainly from the same context.
TEST(QueuedDecoding, DraftStepsChainedOnTheDeviceEqualPlainDecoding) {
  TestModel target(kGolden + "qwen3_f32", kCapacity),
      draft(kGolden + "llama_gqa_f32", kCapacity + kSmallBatch),
      plain_draft(kGolden + "llama_gqa_f32", kCapacity + kSmallBatch);
  ModelDrafter drafter(*draft.model, *draft.kv, target.config.vocab_size, 8, 0.0);
  std::mt19937 rng(9);
  std::vector<int32_t> context = random_prompt(rng, target.config.vocab_size);
  Generator plain(*plain_draft.model, *plain_draft.kv);
  plain.set_queued_decoding(false);
  for (int k : {1, 2, 5, 8}) {
    SCOPED_TRACE(k);
    DraftProposal proposal;
    proposal.verify_device = target.backend->device();
    drafter.propose(context, k, SamplingParams{}, proposal);
    const std::vector<int32_t> expected =
        plain.generate(GenerateRequest{context, k, {}, {}}).tokens;
    EXPECT_EQ(proposal.tokens, expected);
    context.insert(context.end(), expected.begin(), expected.begin() + (k + 1) / 2);
  }
}

// A forward whose last rows read their tokens on the device computes what it computes from host
// tokens, bit for bit.
TEST(QueuedDecoding, RowsWithDeviceTokensEqualHostTokens) {
  TestModel m(kGolden + "qwen3_f32", kCapacity);
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = random_prompt(rng, m.config.vocab_size);
  Generator(*m.model, *m.kv).prefill(prompt);
  const int n = static_cast<int>(prompt.size());
  const int vocab = m.config.vocab_size;
  const std::vector<int32_t> rows{3, 17, 5, 42, 8};
  const std::vector<int32_t> positions{n, n + 1, n + 2, n + 3, n + 4};
  DeviceBuffer device_rows = m.backend->alloc(rows.size() * sizeof(int32_t));
  m.backend->copy_to_device(device_rows.data(), rows.data(), rows.size() * sizeof(int32_t));
  std::vector<float> want(rows.size() * vocab), got(rows.size() * vocab);
  for (int from : {-1, 0, 1, 4}) {  // -1: every token from the host
    SCOPED_TRACE(from);
    ForwardBatch batch{static_cast<int>(rows.size()), from == 0 ? nullptr : rows.data(),
                       positions.data()};
    if (from >= 0) {
      batch.device_tokens = static_cast<const int32_t*>(device_rows.data()) + from;
      batch.device_tokens_from = from;
    }
    const Tensor logits = m.model->forward(batch, *m.kv);
    m.backend->copy_to_host((from < 0 ? want : got).data(), logits.data, logits.bytes());
    if (from >= 0) EXPECT_TRUE(got == want);
  }
  ForwardBatch bad{static_cast<int>(rows.size()), nullptr, positions.data()};
  bad.device_tokens = static_cast<const int32_t*>(device_rows.data());
  bad.device_tokens_from = 2;  // host rows without host tokens
  EXPECT_THROW(m.model->forward(bad, *m.kv), Error);
}

// A draft whose verification reads its tokens on the device leaves them there: the same tokens
// as a download, and the next proposal (after they are read) is the same as well.
TEST(QueuedDecoding, DraftTokensLeftOnTheDeviceEqualDownloadedOnes) {
  TestModel target(kGolden + "qwen3_f32", kCapacity),
      left(kGolden + "llama_gqa_f32", kCapacity + kSmallBatch),
      fetched(kGolden + "llama_gqa_f32", kCapacity + kSmallBatch);
  const int vocab = target.config.vocab_size;
  ModelDrafter left_drafter(*left.model, *left.kv, vocab, 8, 0.0);
  ModelDrafter fetched_drafter(*fetched.model, *fetched.kv, vocab, 8, 0.0);
  std::mt19937 rng(13);
  std::vector<int32_t> context = random_prompt(rng, vocab);
  for (int k : {1, 3, 8, 2}) {
    SCOPED_TRACE(k);
    DraftProposal on_device, downloaded;
    on_device.verify_device = downloaded.verify_device = target.backend->device();
    on_device.device_tokens_ok = true;
    left_drafter.propose(context, k, SamplingParams{}, on_device);
    fetched_drafter.propose(context, k, SamplingParams{}, downloaded);
    ASSERT_NE(on_device.device_tokens, nullptr);
    EXPECT_TRUE(on_device.tokens.empty());
    EXPECT_EQ(on_device.size(), k);
    EXPECT_EQ(downloaded.device_tokens, nullptr);
    std::vector<int32_t> tokens(k);
    left.backend->copy_to_host(tokens.data(), on_device.device_tokens, k * sizeof(int32_t));
    EXPECT_EQ(tokens, downloaded.tokens);
    EXPECT_EQ(left.kv->length(0), fetched.kv->length(0));
    // Proposing again before the tokens are read is refused.
    if (k == 3) EXPECT_THROW(left_drafter.propose(context, k, SamplingParams{}, on_device), Error);
    left_drafter.device_tokens_read(tokens);
    // Half the drafts accepted, then a token of the target's.
    context.insert(context.end(), tokens.begin(), tokens.begin() + k / 2);
    context.push_back(static_cast<int32_t>(rng() % vocab));
  }
}

}  // namespace
}  // namespace specd
