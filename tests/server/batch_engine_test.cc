// Continuous batching is exact: 16 requests decoded together (plain, n-gram, draft model,
// n-gram + draft) emit exactly the tokens each gives alone with the single-sequence Generator,
// greedy and sampled; cancellation frees slots; stop callbacks cut inside accepted drafts.
// SPECD_TEST_DEVICE=cuda runs it on the GPU.
#include "engine/batch_engine.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "../integration/test_device.h"
#include "core/error.h"
#include "engine/generator.h"
#include "engine/prefix_cache.h"
#include "engine/sequence_drafter.h"
#include "io/json_file.h"
#include "io/tensor_store.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"

namespace specd {
namespace {

const std::string kRoot = SPECD_SOURCE_DIR;
constexpr int kCapacity = 512, kMaxRows = 64, kTokens = 20, kRequests = 16;

struct Model {
  ModelConfig config;
  TensorStore store;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  Model(const std::string& dir, int slots, int capacity) {
    config = load_model_config(dir);
    store = TensorStore::open_dir(dir);
    backend = make_backend(testing_support::test_device(), 2);
    model = std::make_unique<Transformer>(*backend, config, store,
                                          TransformerLimits{kMaxRows, kSmallBatch, capacity});
    kv = std::make_unique<KvCache>(
        *backend, KvCacheShape{config.n_layers, config.n_kv_heads, config.head_dim, slots, capacity,
                               DType::kBF16});
  }
};

std::vector<std::vector<int32_t>> prompts(int count) {
  std::ifstream in(kRoot + "/bench/prompts/pycoder_eval.jsonl");
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line) && static_cast<int>(out.size()) < count) {
    auto ids = parse_json(line, "prompt")["prompt_ids"].get<std::vector<int32_t>>();
    // Varied lengths, some past one prefill chunk, all within the context.
    const size_t keep = std::min<size_t>(ids.size(), 20 + 13 * out.size());
    out.emplace_back(ids.begin(), ids.begin() + keep);
  }
  return out;
}

SamplingParams params_for(int i, bool sampled) {
  SamplingParams p;
  if (sampled) {
    p.temperature = 0.8;
    p.top_p = 0.95;
    p.seed = 1000 + i;
  }
  return p;
}

class BatchEngineTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {
 protected:
  static void SetUpTestSuite() {
    target_ = new Model(kRoot + "/models/pycoder-target", kRequests, kCapacity);
    draft_ = new Model(kRoot + "/models/pycoder-draft", kRequests, kCapacity + kSmallBatch);
  }
  static void TearDownTestSuite() {
    delete target_;
    delete draft_;
  }
  // Per-sequence drafters of `mode` (each with its own draft cache).
  SequenceDrafterOptions drafting(const std::string& mode) {
    SequenceDrafterOptions o;
    o.mode = mode;
    o.draft_model = draft_->model.get();
    o.draft_cache = draft_->kv->shape();
    o.draft_cache.n_slots = 1;
    o.target_vocab = target_->config.vocab_size;
    o.max_k = 8;
    return o;
  }
  static Model* target_;
  static Model* draft_;
};
Model* BatchEngineTest::target_ = nullptr;
Model* BatchEngineTest::draft_ = nullptr;

// Runs all requests through a BatchEngine of `parallel` slots, stepping on this thread.
// `batched`: draft-model proposals through a BatchDraftModel over `draft` (slots per sequence).
std::vector<std::vector<int32_t>> run_batched(Model& target, const SequenceDrafterOptions& drafting,
                                              const std::vector<GenerateRequest>& requests,
                                              int parallel, Model* draft = nullptr) {
  BatchEngineOptions options;
  options.parallel = parallel;
  options.sampled_draft_k = 4;
  std::unique_ptr<BatchDraftModel> draft_model;
  if (draft) {
    draft_model =
        std::make_unique<BatchDraftModel>(*draft->model, *draft->kv, target.config.vocab_size, 0.0);
    options.draft_model = draft_model.get();
  }
  BatchEngine engine(*target.model, *target.kv, options,
                     [&] { return make_sequence_drafter(drafting); });
  engine.warm_up();  // records forwards on a GPU; must leave nothing behind
  std::vector<std::vector<int32_t>> outputs(requests.size());
  int done = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto request = std::make_shared<BatchRequest>();
    request->generate = requests[i];
    request->on_token = [&outputs, i](int32_t token, const TokenLogprob*) {
      outputs[i].push_back(token);
      return true;
    };
    request->on_done = [&done](const GenerationResult& result) {
      EXPECT_TRUE(result.finish_reason == "length" || result.finish_reason == "stop")
          << result.finish_reason;
      ++done;
    };
    engine.submit(request);
  }
  for (int steps = 0; done < static_cast<int>(requests.size()) && steps < 100000; ++steps) {
    engine.step();
  }
  EXPECT_EQ(done, static_cast<int>(requests.size()));
  return outputs;
}

TEST_P(BatchEngineTest, SixteenTogetherEqualOneAtATime) {
  const auto& [mode, sampled] = GetParam();
  std::vector<GenerateRequest> requests;
  auto ids = prompts(kRequests);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(GenerateRequest{ids[i], kTokens, params_for(i, sampled), {0}});
  }
  // "draft" and "ngram+draft" batch the draft model over the sequences (as `serve` does);
  // "own-draft" gives every sequence its own ModelDrafter.
  const bool batched_draft = mode == "draft" || mode == "ngram+draft";
  const std::string own =
      batched_draft ? (mode == "draft" ? "none" : "ngram") : (mode == "own-draft" ? "draft" : mode);
  // Reference: each request alone. Plain decoding when the result must equal it draw for draw
  // (greedy, or point-mass n-gram drafts). With sampled draft-model proposals the output
  // depends on the (fixed) draft lengths: the reference is one sequence at a time with
  // per-sequence ModelDrafters, which the batched draft model must match exactly.
  std::vector<std::vector<int32_t>> expected;
  const bool plain_reference = !sampled || mode == "none" || mode == "ngram";
  if (plain_reference) {
    Model alone(kRoot + "/models/pycoder-target", 1, kCapacity);
    Generator generator(*alone.model, *alone.kv);
    for (const auto& r : requests) expected.push_back(generator.generate(r).tokens);
  } else {
    const std::string per_sequence = mode == "own-draft" ? "draft" : mode;
    for (const auto& r : requests) {
      expected.push_back(run_batched(*target_, drafting(per_sequence), {r}, 1)[0]);
    }
  }
  Model* draft = batched_draft ? draft_ : nullptr;
  auto together = run_batched(*target_, drafting(own), requests, kRequests, draft);
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(together[i], expected[i]) << "request " << i << " mode " << mode;
  }
  if (sampled) return;
  // Fewer slots than requests: queued requests wait and still give the same tokens.
  auto queued = run_batched(*target_, drafting(own), requests, 5, draft);
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(queued[i], expected[i]) << "request " << i;
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchEngineTest,
                         ::testing::Combine(::testing::Values("none", "ngram", "draft",
                                                              "ngram+draft", "own-draft"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           for (char& c : name) c = (c == '+' || c == '-') ? '_' : c;
                           return name + (std::get<1>(info.param) ? "_sampled" : "_greedy");
                         });

TEST_F(BatchEngineTest, StopCallbackCutsInsideAcceptedDraftAndCancelFreesSlot) {
  auto ids = prompts(3);
  Generator generator(*target_->model, *target_->kv);
  GenerateRequest base{ids[2], 40, SamplingParams{}, {}};
  // Greedy reference on slot 0 of the shared cache (the engine below resets it).
  std::vector<int32_t> reference = generator.generate(base).tokens;
  BatchEngineOptions options;
  options.parallel = 2;
  BatchEngine engine(*target_->model, *target_->kv, options,
                     [&] { return make_sequence_drafter(drafting("draft")); });
  // Stop right after the 10th token, wherever it falls in a round.
  auto stopping = std::make_shared<BatchRequest>();
  stopping->generate = base;
  std::vector<int32_t> got;
  std::string reason;
  stopping->on_token = [&](int32_t token, const TokenLogprob*) {
    got.push_back(token);
    return got.size() < 10;
  };
  stopping->on_done = [&](const GenerationResult& r) { reason = r.finish_reason; };
  auto cancelled = std::make_shared<BatchRequest>();
  cancelled->generate = base;
  std::string cancel_reason;
  int cancelled_tokens = 0;
  cancelled->on_token = [&](int32_t, const TokenLogprob*) { return ++cancelled_tokens < 1000; };
  cancelled->on_done = [&](const GenerationResult& r) { cancel_reason = r.finish_reason; };
  engine.submit(stopping);
  engine.submit(cancelled);
  for (int i = 0; i < 10000 && (reason.empty() || cancel_reason.empty()); ++i) {
    if (cancelled_tokens >= 3) cancelled->cancelled.store(true);
    engine.step();
  }
  EXPECT_EQ(reason, "stop");
  EXPECT_EQ(cancel_reason, "cancelled");
  ASSERT_EQ(got.size(), 10u);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), reference.begin()));
  EXPECT_LT(cancelled_tokens, 40);
  EXPECT_EQ(engine.snapshot().active, 0);
  EXPECT_FALSE(engine.step());
}

TEST_F(BatchEngineTest, RejectsBadRequestsWithClearErrors) {
  BatchEngineOptions options;
  options.parallel = 1;
  BatchEngine engine(*target_->model, *target_->kv, options, {});
  auto request = std::make_shared<BatchRequest>();
  request->generate = GenerateRequest{{}, 4, SamplingParams{}, {}};
  EXPECT_THROW(engine.submit(request), Error);
  request->generate = GenerateRequest{{1, 2, 3}, kCapacity, SamplingParams{}, {}};
  EXPECT_THROW(engine.submit(request), Error);
  request->generate = GenerateRequest{{1, target_->config.vocab_size}, 4, SamplingParams{}, {}};
  EXPECT_THROW(engine.submit(request), Error);
  request->generate = GenerateRequest{{1, 2}, 4, SamplingParams{}, {}};
  request->generate.sampling.temperature = -1;
  EXPECT_THROW(engine.submit(request), Error);
}

}  // namespace
}  // namespace specd

namespace specd {
namespace {

// The prefix cache restores whole prefill chunks; outputs with full and partial hits equal
// plain generation, and the restored token counts are what the shared prefixes allow.
TEST(PrefixCache, HitsAreExactAndCountWholeChunks) {
  Model target(kRoot + "/models/pycoder-target", 2, kCapacity);
  std::vector<int32_t> pool;
  for (const auto& p : prompts(16)) pool.insert(pool.end(), p.begin(), p.end());
  ASSERT_GT(pool.size(), 420u);
  auto slice = [&](size_t a, size_t b) {
    return std::vector<int32_t>(pool.begin() + a, pool.begin() + b);
  };
  std::vector<int32_t> a = slice(0, 300);
  std::vector<int32_t> b = slice(0, 200);
  std::vector<int32_t> tail = slice(350, 420);
  b.insert(b.end(), tail.begin(), tail.end());
  std::vector<int32_t> d = slice(0, 130);
  struct Case {
    std::vector<int32_t> prompt;
    int cached;  // expected restored tokens (chunks of kMaxRows = 64)
  };
  for (size_t budget : {size_t(64) << 20, size_t(1)}) {
    const bool big = budget > 1;
    std::vector<Case> cases = {{a, 0}, {b, big ? 192 : 0}, {a, big ? 256 : 0}, {d, big ? 128 : 0}};
    PrefixCache cache(*target.backend, *target.kv, kMaxRows, budget);
    BatchEngineOptions options;
    options.parallel = 2;
    options.prefix_cache = &cache;
    BatchEngine engine(*target.model, *target.kv, options, {});
    Model alone(kRoot + "/models/pycoder-target", 1, kCapacity);
    Generator generator(*alone.model, *alone.kv);
    for (const Case& c : cases) {
      GenerateRequest request{c.prompt, 12, SamplingParams{}, {}};
      std::vector<int32_t> expected = generator.generate(request).tokens;
      auto r = std::make_shared<BatchRequest>();
      r->generate = request;
      GenerationResult got;
      bool done = false;
      r->on_done = [&](const GenerationResult& result) {
        got = result;
        done = true;
      };
      engine.submit(r);
      for (int i = 0; i < 10000 && !done; ++i) engine.step();
      ASSERT_TRUE(done);
      EXPECT_EQ(got.tokens, expected) << "prompt of " << c.prompt.size() << " tokens";
      EXPECT_EQ(got.stats.cached_prompt_tokens, c.cached) << "prompt of " << c.prompt.size();
    }
    EXPECT_EQ(cache.bytes() > 0, big);
  }
}

}  // namespace
}  // namespace specd
