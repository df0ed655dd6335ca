// The shipped demo pair (models/pycoder-target, models/pycoder-draft) on the committed evaluation
// prompts: speculative decoding emits exactly the plain-decoding tokens, and the draft is good
// enough to be worth running (acceptance length well above 1).
#include <gtest/gtest.h>

#include <fstream>

#include "engine/generator.h"
#include "io/json_file.h"
#include "io/tensor_store.h"
#include "spec/chained_drafter.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"
#include "test_model.h"

namespace specd {
namespace {

const std::string kRoot = SPECD_SOURCE_DIR;
constexpr int kPrompts = 20, kTokens = 256, kCapacity = 1024;

struct Loaded : testing_support::TestModel {
  explicit Loaded(const std::string& dir) : TestModel(dir, kCapacity, DType::kBF16, 2, 512) {}
};

std::vector<std::vector<int32_t>> eval_prompts() {
  std::ifstream in(kRoot + "/bench/prompts/pycoder_eval.jsonl");
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (std::getline(in, line) && static_cast<int>(prompts.size()) < kPrompts) {
    prompts.push_back(parse_json(line, "eval prompt")["prompt_ids"].get<std::vector<int32_t>>());
  }
  return prompts;
}

TEST(DemoModels, SpeculativeOutputEqualsPlainAndDraftsAreAccepted) {
  Loaded target(kRoot + "/models/pycoder-target");
  Loaded draft(kRoot + "/models/pycoder-draft");
  ModelDrafter model_drafter(*draft.model, *draft.kv, target.config.vocab_size, 8, 0.0);
  NgramDrafter ngram;
  ChainedDrafter chained({&ngram, &model_drafter});
  Generator plain(*target.model, *target.kv);
  Generator fixed4(*target.model, *target.kv, &model_drafter, DraftLengthOptions{1, 8, 4});
  Generator both(*target.model, *target.kv, &chained, DraftLengthOptions{1, 8, 0});
  std::vector<std::vector<int32_t>> prompts = eval_prompts();
  ASSERT_EQ(prompts.size(), static_cast<size_t>(kPrompts));
  double tokens = 0, rounds = 0;
  for (const auto& prompt : prompts) {
    GenerateRequest request{prompt, kTokens, {}, {}};
    std::vector<int32_t> expected = plain.generate(request).tokens;
    for (Generator* g : {&fixed4, &both}) {
      GenerationResult result = g->generate(request);
      ASSERT_EQ(result.tokens, expected);
      if (g == &fixed4) {
        tokens += result.stats.generated_tokens - 1;
        rounds += result.stats.rounds;
      }
    }
  }
  EXPECT_GT(tokens / rounds, 2.0) << "acceptance length of the demo pair at k = 4";
}

}  // namespace
}  // namespace specd
