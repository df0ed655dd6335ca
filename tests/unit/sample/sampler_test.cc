// Logits processors against direct formulas, and sampled frequencies against the distribution.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"

namespace specd {
namespace {

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 2);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

// The processed distribution computed the slow, obvious way (full sort, double precision).
std::vector<double> reference_distribution(const std::vector<float>& logits, const SamplingParams& p) {
  const int n = static_cast<int>(logits.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<double> probs(n, 0);
  int keep = n;
  if (p.top_k > 0 && p.top_k < n) {
    keep = p.top_k;
    while (keep < n && logits[order[keep]] == logits[order[p.top_k - 1]]) ++keep;
  }
  double total = 0;
  for (int j = 0; j < keep; ++j) total += std::exp((logits[order[j]] - logits[order[0]]) / p.temperature);
  for (int j = 0; j < keep; ++j) {
    probs[order[j]] = std::exp((logits[order[j]] - logits[order[0]]) / p.temperature) / total;
  }
  double cumulative = 0;
  int nucleus = 0;
  while (nucleus < keep && cumulative < p.top_p && probs[order[nucleus]] >= p.min_p * probs[order[0]]) {
    cumulative += probs[order[nucleus++]];
  }
  nucleus = std::max(nucleus, 1);
  double kept = 0;
  for (int j = 0; j < n; ++j) {
    if (j >= nucleus) probs[order[j]] = 0;
    else kept += probs[order[j]];
  }
  for (double& q : probs) q /= kept;
  return probs;
}

TEST(Sampler, GreedyIsFirstArgmax) {
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f};
  Sampler sampler(4);
  EXPECT_EQ(sampler.sample(logits, SamplingParams{}, 0), 1);
}

TEST(Sampler, DistributionMatchesReference) {
  const int vocab = 2000;
  Sampler sampler(vocab);
  std::vector<float> probs(vocab);
  struct Case { double t; int k; double p, min_p; };
  for (Case c : {Case{1.0, 0, 1.0, 0}, Case{0.7, 50, 1.0, 0}, Case{1.3, 0, 0.9, 0},
                 Case{0.8, 100, 0.8, 0.05}, Case{1.0, 0, 1.0, 0.1}, Case{0.5, 1, 1.0, 0}}) {
    SamplingParams p;
    p.temperature = c.t;
    p.top_k = c.k;
    p.top_p = c.p;
    p.min_p = c.min_p;
    std::vector<float> logits = random_logits(vocab, 3 + c.k);
    sampler.distribution(logits, p, probs);
    std::vector<double> expected = reference_distribution(logits, p);
    for (int i = 0; i < vocab; ++i) {
      ASSERT_NEAR(probs[i], expected[i], 1e-6) << "token " << i << " t=" << c.t << " k=" << c.k;
    }
  }
}

TEST(Sampler, SampledFrequenciesFollowTheDistribution) {
  const int vocab = 6;
  std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
  SamplingParams p;
  p.temperature = 0.9;
  p.top_k = 5;
  p.seed = 1234;
  Sampler sampler(vocab);
  std::vector<float> probs(vocab);
  sampler.distribution(logits, p, probs);
  const int draws = 200000;
  std::vector<int> counts(vocab, 0);
  for (int i = 0; i < draws; ++i) counts[sampler.sample(logits, p, i)]++;
  EXPECT_EQ(counts[3], 0);  // cut by top-k
  double chi2 = 0;
  for (int i = 0; i < vocab; ++i) {
    if (probs[i] == 0) continue;
    double expected = probs[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  EXPECT_LT(chi2, 18.47);  // 4 degrees of freedom, p = 0.001
}

TEST(Sampler, PenaltiesFollowTheirDefinitions) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f};
  TokenHistory prompt(4), output(4);
  prompt.add(0);
  output.add(1);
  output.add(1);
  output.add(2);
  SamplingParams p;
  p.repetition_penalty = 2.0;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  Sampler::apply_penalties(logits, p, prompt, output);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);                  // prompt token: 2 / 2
  EXPECT_FLOAT_EQ(logits[1], -4.0f - 0.5f - 0.5f);   // -2 * 2, presence, 2 x frequency
  EXPECT_FLOAT_EQ(logits[2], 0.5f - 0.5f - 0.25f);   // 1 / 2, presence, frequency
  EXPECT_FLOAT_EQ(logits[3], 0.5f);
  output.remove(1);
  EXPECT_EQ(output.count(1), 1);
  output.remove(2);
  EXPECT_EQ(output.seen(), std::vector<int>{1});
}

TEST(Sampler, InvalidParamsAreErrors) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_THROW(validate_sampling_params(p), Error);
  p = SamplingParams{};
  p.temperature = -1;
  EXPECT_THROW(validate_sampling_params(p), Error);
  p = SamplingParams{};
  p.temperature = NAN;
  EXPECT_THROW(validate_sampling_params(p), Error);
  p = SamplingParams{};
  p.min_p = 1.5;
  EXPECT_THROW(validate_sampling_params(p), Error);
}

}  // namespace
}  // namespace specd
