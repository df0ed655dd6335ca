// The adaptive draft length replayed on recorded text: the demo pair's acceptance at every
// position of 8 prompts' greedy outputs and its measured costs (`specd bench --acceptance-trace`,
// tests/data/spec/), so that policies compare without the machine's noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "spec/draft_length.h"

namespace specd {
namespace {

struct Trace {
  int max_k = 0;
  std::vector<double> draft_seconds;         // [k - 1]: proposing k tokens
  std::vector<double> verify_seconds;        // [r - 1]: a target forward of r rows
  std::vector<std::vector<int>> acceptance;  // [prompt][p - 1]: matching tokens of a max_k draft
  std::vector<std::vector<int>> proposed;    // [prompt][p - 1]: tokens the drafter proposed
};

Trace read_trace(const std::string& name) {
  std::ifstream file(std::string(SPECD_SOURCE_DIR) + "/tests/data/spec/" + name);
  const nlohmann::json j = nlohmann::json::parse(file);
  Trace t;
  t.max_k = j.at("max_k").get<int>();
  t.draft_seconds = j.at("draft_seconds").get<std::vector<double>>();
  t.verify_seconds = j.at("verify_seconds").get<std::vector<double>>();
  t.acceptance = j.at("acceptance").get<std::vector<std::vector<int>>>();
  t.proposed = j.at("proposed").get<std::vector<std::vector<int>>>();
  return t;
}

struct Throughput {
  double tokens = 0, seconds = 0;
  double rate() const { return tokens / seconds; }
};

// Decodes every prompt of the trace `passes` times in turn, one policy carried from prompt to
// prompt as in one process, with a fixed length (fixed_k > 0) or the adaptive one. Each round's
// times are the trace's times `jitter` spread (uniform), as the policy sees them measured.
Throughput replay(const Trace& t, int fixed_k, double jitter, int passes = 4, uint32_t seed = 1) {
  DraftLengthOptions options;
  options.max_k = t.max_k;
  options.fixed_k = fixed_k;
  DraftLengthPolicy learned(options);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-0.5, 0.5);
  Throughput run;
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t i = 0; i < t.acceptance.size(); ++i) {
      const std::vector<int>& lengths = t.acceptance[i];
      DraftLengthPolicy policy = learned.next_request();
      const int n = static_cast<int>(lengths.size()) + 1;  // tokens of the output
      for (int p = 1; p < n;) {                            // the first token came from prefill
        const int k = std::min({policy.choose(), n - p - 1, t.proposed[i][p - 1]});
        const int accepted = std::min(k, lengths[p - 1]);
        const double draft = k > 0 ? t.draft_seconds[k - 1] * (1 + jitter * uniform(rng)) : 0;
        const double verify = t.verify_seconds[k] * (1 + jitter * uniform(rng));
        policy.record(k, accepted, draft, k + 1, verify);
        run.tokens += accepted + 1;
        run.seconds += draft + verify;
        p += accepted + 1;
      }
      learned = policy;
    }
  }
  return run;
}

void expect_near_best_fixed(const Trace& t, const std::string& name, double fraction) {
  ASSERT_EQ(t.draft_seconds.size(), static_cast<size_t>(t.max_k));
  ASSERT_EQ(t.verify_seconds.size(), static_cast<size_t>(t.max_k + 1));
  double best = 0;
  int best_k = 0;
  std::string rates;
  for (int k = 1; k <= t.max_k; ++k) {
    const double rate = replay(t, k, 0.0).rate();
    rates += " " + std::to_string(k) + ": " + std::to_string(rate);
    if (rate > best) best = rate, best_k = k;
  }
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const double adaptive = replay(t, 0, 0.2, 4, seed).rate();
    EXPECT_GT(adaptive, fraction * best)
        << name << ": adaptive " << adaptive << " tokens/s, best fixed length " << best_k
        << "; fixed lengths" << rates;
  }
}

// The demo pair on a 2-core Zen 3 VM, where each verified row costs about a third of a decode
// step and the best fixed length is short.
TEST(DraftLengthReplay, DemoPairOnTwoCoreAvx2) {
  const std::string name = "pycoder_acceptance_zen3.json";
  expect_near_best_fixed(read_trace(name), name, 0.95);
}

// Prompt lookup (n-gram drafts: no model, a proposal as long as the match found) on a
// code-rewriting task whose output repeats its input with small edits, Gemma 3 270M (Q4_K_M) on
// the 2-core Zen 3 VM, where each added row costs a third of a one-row forward or more, and 6
// rows 1.42x 5 (the block-quantised kernel's second pass over the weights).
TEST(DraftLengthReplay, PromptLookupOnRewritingTask) {
  const std::string name = "gemma3_ngram_acceptance_zen3.json";
  expect_near_best_fixed(read_trace(name), name, 0.95);
}

// The same text with the demo pair's costs on one H200 (verification 0.26 ms at any row count,
// 0.11 ms a draft token): longer drafts pay (the best fixed length is 3).
TEST(DraftLengthReplay, DemoPairWithGpuCosts) {
  Trace t = read_trace("pycoder_acceptance_zen3.json");
  for (int k = 1; k <= t.max_k; ++k) t.draft_seconds[k - 1] = 0.11e-3 * k;
  std::fill(t.verify_seconds.begin(), t.verify_seconds.end(), 0.26e-3);
  expect_near_best_fixed(t, "GPU costs", 0.95);
}

}  // namespace
}  // namespace specd
