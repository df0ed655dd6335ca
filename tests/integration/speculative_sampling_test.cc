// At T > 0 speculative decoding samples exactly the target's distribution: the frequencies of
// 3-token continuations over 100,000 runs must pass a chi-square test (p = 0.001) against the
// exact distribution, for a far draft model (rejection sampling) and point-mass proposals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/generator.h"
#include "io/tensor_store.h"
#include "spec/chained_drafter.h"
#include "spec/model_drafter.h"
#include "test_model.h"
#include "tiny_model.h"

namespace specd {
namespace {

using testing_support::TinyShape;
using testing_support::write_tiny_model;

constexpr int kVocab = 12;
constexpr int kSamples = 100000;

struct Tiny : testing_support::TestModel {
  explicit Tiny(const std::string& dir) : TestModel(dir, 32, DType::kF32, 1, 16) {}
};

// Exact probability of every continuation x1 x2 x3 (index x1*V*V + x2*V + x3).
std::vector<double> exact_distribution(Tiny& t, const std::vector<int32_t>& prompt,
                                       const SamplingParams& params) {
  Sampler sampler(kVocab);
  std::vector<float> probs(kVocab);
  std::vector<double> out(kVocab * kVocab * kVocab);
  for (int x1 = 0; x1 < kVocab; ++x1) {
    for (int x2 = 0; x2 < kVocab; ++x2) {
      std::vector<int32_t> rows = prompt;
      rows.push_back(x1);
      rows.push_back(x2);
      std::vector<int32_t> positions(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) positions[i] = static_cast<int32_t>(i);
      ForwardBatch batch{static_cast<int>(rows.size()), rows.data(), positions.data()};
      std::vector<float> logits =
          testing_support::host_copy(*t.backend, t.model->forward(batch, *t.kv));
      const int last = static_cast<int>(rows.size()) - 1;
      auto p = [&](int row, int token) {
        sampler.distribution(std::span<const float>(logits.data() + static_cast<size_t>(row) * kVocab, kVocab), params,
                             probs);
        return static_cast<double>(probs[token]);
      };
      double p12 = p(last - 2, x1) * p(last - 1, x2);
      for (int x3 = 0; x3 < kVocab; ++x3) {
        out[(x1 * kVocab + x2) * kVocab + x3] = p12 * p(last, x3);
      }
    }
  }
  return out;
}

// Chi-square statistic with cells of expected count < 5 pooled; returns {statistic, dof}.
std::pair<double, int> chi_square(const std::vector<int>& counts, const std::vector<double>& p) {
  double stat = 0, pooled_count = 0, pooled_expected = 0;
  int cells = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    double expected = p[i] * kSamples;
    if (expected < 5) {
      pooled_count += counts[i];
      pooled_expected += expected;
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0) {
    stat += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++cells;
  }
  return {stat, cells - 1};
}

// Critical value of chi-square at p = 0.001 (Wilson-Hilferty approximation).
double chi_square_critical(int dof) {
  const double z = 3.0902;
  double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + z * std::sqrt(a), 3);
}

class SpeculativeSampling : public testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SpeculativeSampling, MatchesTheTargetDistribution) {
  auto [drafter_kind, variant] = GetParam();
  TinyShape shape;
  Tiny target(write_tiny_model("target", shape, 1));
  shape.scale = 0.9f;  // a different, sharper model: often far from the target
  Tiny draft_model(write_tiny_model("draft", shape, 2));
  const std::vector<int32_t> prompt = {1, 2, 3};
  SamplingParams params;
  params.temperature = variant == 0 ? 1.0 : 0.7;
  params.top_k = variant == 0 ? 0 : 8;
  params.top_p = variant == 0 ? 1.0 : 0.95;
  std::vector<double> exact = exact_distribution(target, prompt, params);

  ModelDrafter model_drafter(*draft_model.model, *draft_model.kv, kVocab, 2, 0.0);
  // Point masses on the most likely pair (x1, x2): accepted sometimes, rejected often.
  size_t best = std::max_element(exact.begin(), exact.end()) - exact.begin();
  OracleDrafter point_mass({1, 2, 3, static_cast<int32_t>(best / (kVocab * kVocab)),
                            static_cast<int32_t>(best / kVocab % kVocab)});
  Drafter* drafter = drafter_kind == "draft" ? static_cast<Drafter*>(&model_drafter)
                                             : static_cast<Drafter*>(&point_mass);
  Generator spec(*target.model, *target.kv, drafter, DraftLengthOptions{1, 2, 2});
  std::vector<int> counts(exact.size(), 0);
  int drafted = 0, accepted = 0;
  for (int i = 0; i < kSamples; ++i) {
    params.seed = 1000003ull * i + 17;
    GenerateRequest request{prompt, 3, params, {}};
    GenerationResult result = spec.generate(request);
    ASSERT_EQ(result.tokens.size(), 3u);
    counts[(result.tokens[0] * kVocab + result.tokens[1]) * kVocab + result.tokens[2]]++;
    drafted += result.stats.drafted;
    accepted += result.stats.accepted;
  }
  auto [stat, dof] = chi_square(counts, exact);
  EXPECT_LT(stat, chi_square_critical(dof)) << "dof " << dof;
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);  // both outcomes were exercised
}

INSTANTIATE_TEST_SUITE_P(Drafters, SpeculativeSampling,
                         testing::Combine(testing::Values("draft", "point_mass"),
                                          testing::Values(0, 1)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_variant" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The same seed gives the same tokens with and without point-mass speculation.
TEST(SpeculativeSampling, PointMassProposalsReproducePlainDrawsExactly) {
  TinyShape shape;
  Tiny target(write_tiny_model("target_exact", shape, 3));
  OracleDrafter point_mass({1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4});
  Generator plain(*target.model, *target.kv);
  Generator spec(*target.model, *target.kv, &point_mass, DraftLengthOptions{1, 4, 4});
  for (int seed = 0; seed < 200; ++seed) {
    SamplingParams params;
    params.temperature = 0.9;
    params.seed = seed;
    GenerateRequest request{{1, 2, 3}, 12, params, {}};
    EXPECT_EQ(spec.generate(request).tokens, plain.generate(request).tokens) << seed;
  }
}

}  // namespace
}  // namespace specd
