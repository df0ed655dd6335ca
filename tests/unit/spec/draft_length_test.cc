// The adaptive draft length against simulated rounds with known acceptance and costs: its
// long-run tokens per second must come close to the best fixed length's.
#include "spec/draft_length.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace specd {
namespace {

// A simulated drafter/target pair: each draft token is accepted with probability `alpha` (given
// the earlier ones were), drafting k tokens costs draft_base + draft_cost * k seconds (k > 0) and
// verifying r rows costs verify_base + verify_per_row * r seconds (times `noise` spread, uniform,
// per round).
struct Pair {
  double alpha, draft_cost, verify_base, verify_per_row, noise, draft_base = 0;
  double first_use_extra = 0;  // added once to the first verification of each length
  double draft(int k) const { return k > 0 ? draft_base + draft_cost * k : 0; }
};

struct Throughput {
  double tokens = 0, seconds = 0;
  double rate() const { return tokens / seconds; }
};

// `rounds` rounds with a fixed length (fixed_k > 0) or the adaptive policy (fixed_k = 0).
Throughput simulate(const Pair& pair, int fixed_k, int rounds, uint32_t seed) {
  DraftLengthOptions options;
  options.min_k = 1;
  options.max_k = 8;
  options.fixed_k = fixed_k;
  DraftLengthPolicy policy(options);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Throughput run;
  std::vector<bool> seen(options.max_k + 1, false);
  for (int r = 0; r < rounds; ++r) {
    const int k = policy.choose();
    int accepted = 0;
    while (accepted < k && uniform(rng) < pair.alpha) ++accepted;
    const double jitter = 1.0 + pair.noise * (uniform(rng) - 0.5);
    const double draft = pair.draft(k) * jitter;
    double verify = (pair.verify_base + pair.verify_per_row * (k + 1)) * jitter;
    if (!seen[k]) verify += pair.first_use_extra;  // e.g. a CUDA graph recorded for a new length
    seen[k] = true;  // (per simulated request: each starts a new policy)
    policy.record(k, accepted, draft, k + 1, verify);
    run.tokens += accepted + 1;
    run.seconds += draft + verify;
  }
  return run;
}

// Expected tokens per second of fixed length k (the exact value the simulation converges to).
double expected_rate(const Pair& pair, int k) {
  double tokens = 0;
  for (int j = 0; j <= k; ++j) tokens += std::pow(pair.alpha, j);
  return tokens / (pair.draft(k) + pair.verify_base + pair.verify_per_row * (k + 1));
}

void expect_near_best(const Pair& pair, int rounds = 4000) {
  double best = 0;
  int best_k = 1;
  for (int k = 1; k <= 8; ++k) {
    if (expected_rate(pair, k) > best) best = expected_rate(pair, k), best_k = k;
  }
  // Several requests' worth of rounds; one-time costs count, the fixed length pays none.
  Throughput adaptive;
  for (uint32_t seed = 1; seed <= 4000 / rounds; ++seed) {
    const Throughput one = simulate(pair, 0, rounds, seed);
    adaptive.tokens += one.tokens;
    adaptive.seconds += one.seconds;
  }
  EXPECT_GT(adaptive.rate(), 0.93 * best)
      << "alpha " << pair.alpha << ": adaptive " << adaptive.rate()
      << " tok/s, fixed k = " << best_k << " " << best << " tok/s";
}

// Memory-bound verification (rows nearly free), a cheap draft: long drafts pay.
TEST(DraftLengthPolicy, ApproachesTheBestFixedLengthWhenVerificationIsFlat) {
  expect_near_best({0.8, 0.1, 1.0, 0.02, 0.3});
  expect_near_best({0.7, 0.27, 1.0, 0.01, 0.3});  // a CPU demo pair: draft ~0.27 of a step
  expect_near_best({0.9, 0.05, 1.0, 0.0, 0.5});
}

// Compute-bound verification (each row costs a large part of a step): short drafts pay.
TEST(DraftLengthPolicy, ApproachesTheBestFixedLengthWhenRowsCost) {
  expect_near_best({0.8, 0.1, 0.5, 0.4, 0.3});
  expect_near_best({0.6, 0.2, 1.0, 0.25, 0.3});
}

// A draft model whose first step also runs last round's accepted tokens: most of a round's draft
// time is fixed, so longer drafts cost little more (measured on the CPU with the demo pair: 1.05
// ms for 1 draft token, 1.76 ms for 4; verifying 2 rows 2.6 ms, 5 rows 3.1 ms).
TEST(DraftLengthPolicy, ApproachesTheBestFixedLengthWhenDraftingHasAFixedCost) {
  expect_near_best({0.7, 0.24, 2.4, 0.14, 0.2, 0.8});
  expect_near_best({0.6, 0.1, 1.0, 0.05, 0.3, 0.5});
}

// A GPU with a tiny pair (measured: verification 0.26 ms at any row count, 0.11 ms per draft
// token, 95% acceptance), where the first verification of each row count also records a CUDA
// graph (about 1.2 ms): those one-time costs must not steer the choice.
TEST(DraftLengthPolicy, OneTimeCostsOfNewLengthsDoNotSteerTheChoice) {
  expect_near_best({0.95, 0.11, 0.26, 0.0, 0.1, 0.0, 1.2}, 400);
  expect_near_best({0.8, 0.11, 0.26, 0.0, 0.1, 0.0, 1.2}, 400);
}

// Requests of ~64 rounds (256 tokens) with high acceptance: the best length (6 here) lies past
// the lengths a fresh policy has seen, so their acceptance must not be assumed worse than the
// lengths before them.
TEST(DraftLengthPolicy, FindsLongDraftsWithinOneRequest) {
  expect_near_best({0.95, 0.11, 0.26, 0.0, 0.1}, 64);
  expect_near_best({0.9, 0.05, 0.3, 0.01, 0.1}, 64);
}

// Short requests (~32 rounds, 128 tokens) where each verified row costs a third of a step, as a
// small model on a 2-core AVX2 CPU (measured with the demo pair: verifying 5 rows 1.9-2.0x a
// decode step, 9 rows 2.8-3.3x, a draft token 0.2x): a fresh policy must not spend the request
// on drafts far too long.
TEST(DraftLengthPolicy, ShortRequestsWhenRowsCost) {
  expect_near_best({0.85, 0.2, 0.7, 0.3, 0.3}, 32);
  expect_near_best({0.7, 0.2, 0.7, 0.3, 0.3}, 32);
}

// Drafts that are almost never accepted: one draft token (the minimum) wastes least.
TEST(DraftLengthPolicy, StaysShortWhenDraftsAreRejected) {
  expect_near_best({0.05, 0.3, 1.0, 0.05, 0.3});
}

// Single slow rounds are one-time work and left out; costs that stay high are taken up.
TEST(DraftLengthPolicy, CostFitsSkipSpikesButFollowLastingChanges) {
  DraftLengthOptions options;
  DraftLengthPolicy policy(options);
  for (int r = 0; r < 200; ++r) {
    const int k = policy.choose();
    const double spike = r == 100 ? 20.0 : 0.0;  // one recording of something
    policy.record(k, k, 0.1 * k, k + 1, 1.0 + 0.01 * (k + 1) + spike);
  }
  EXPECT_NEAR(policy.verify_seconds(4), 1.04, 0.05);
  for (int r = 0; r < 300; ++r) {  // the machine becomes 5x slower for good
    const int k = policy.choose();
    policy.record(k, k, 0.5 * k, k + 1, 5.0 + 0.05 * (k + 1));
  }
  EXPECT_NEAR(policy.verify_seconds(4), 5.2, 0.3);
  EXPECT_NEAR(policy.draft_seconds(4), 2.0, 0.2);
}

// A request that starts from the last one's policy keeps its costs and needs no start-up
// rounds; the acceptance it carries weighs only a few rounds, so the new text takes over fast.
TEST(DraftLengthPolicy, NextRequestStartsFromWhatWasLearned) {
  DraftLengthOptions options;
  DraftLengthPolicy policy(options);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int r = 0; r < 200; ++r) {
    const int k = policy.choose();
    int accepted = 0;
    while (accepted < k && uniform(rng) < 0.9) ++accepted;
    policy.record(k, accepted, 0.2 * k, k + 1, 0.7 + 0.3 * (k + 1));
  }
  DraftLengthPolicy next = policy.next_request();
  EXPECT_DOUBLE_EQ(next.verify_seconds(5), policy.verify_seconds(5));
  EXPECT_DOUBLE_EQ(next.draft_seconds(3), policy.draft_seconds(3));
  EXPECT_NEAR(next.acceptance(1), policy.acceptance(1), 0.05);  // a prior of a few rounds
  const int first = next.choose();
  EXPECT_EQ(first, policy.next_request().choose());  // no warm-up schedule: the best length
  EXPECT_GE(first, 2);
  EXPECT_LE(first, 4);
  // Ten rounds of rejected drafts in the new request bring its choice down to the shortest.
  for (int r = 0; r < 10; ++r) {
    const int k = next.choose();
    next.record(k, 0, 0.2 * k, k + 1, 0.7 + 0.3 * (k + 1));
  }
  EXPECT_EQ(next.choose(), 1);
}

// Requests that each start from the one before: even short ones run near the best length.
TEST(DraftLengthPolicy, CarriedEstimatesKeepShortRequestsNearTheBest) {
  for (const Pair& pair : {Pair{0.85, 0.2, 0.7, 0.3, 0.3}, Pair{0.95, 0.11, 0.26, 0.0, 0.1}}) {
    double best = 0;
    for (int k = 1; k <= 8; ++k) best = std::max(best, expected_rate(pair, k));
    DraftLengthOptions options;
    DraftLengthPolicy policy(options);
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    Throughput run;
    for (int request = 0; request < 100; ++request) {
      DraftLengthPolicy current = policy.next_request();
      for (int r = 0; r < 32; ++r) {
        const int k = current.choose();
        int accepted = 0;
        while (accepted < k && uniform(rng) < pair.alpha) ++accepted;
        const double jitter = 1.0 + pair.noise * (uniform(rng) - 0.5);
        const double draft = pair.draft(k) * jitter;
        const double verify = (pair.verify_base + pair.verify_per_row * (k + 1)) * jitter;
        current.record(k, accepted, draft, k + 1, verify);
        run.tokens += accepted + 1;
        run.seconds += draft + verify;
      }
      policy = current;
    }
    EXPECT_GT(run.rate(), 0.96 * best) << "alpha " << pair.alpha;
  }
}

TEST(DraftLengthPolicy, FixedLengthIsKept) {
  DraftLengthOptions options;
  options.fixed_k = 3;
  DraftLengthPolicy policy(options);
  for (int r = 0; r < 50; ++r) {
    ASSERT_EQ(policy.choose(), 3);
    policy.record(3, r % 4, 0.1, 4, 1.0);
  }
}

}  // namespace
}  // namespace specd
