// Logits processing and token selection on the host.
#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace specd {

void validate_sampling_params(const SamplingParams& p) {
  SPECD_CHECK(std::isfinite(p.temperature) && p.temperature >= 0,
              "temperature must be >= 0 (got {})", p.temperature);
  SPECD_CHECK(p.top_k >= 0, "top_k must be >= 0 (got {})", p.top_k);
  SPECD_CHECK(p.top_p > 0 && p.top_p <= 1, "top_p must be in (0, 1] (got {})", p.top_p);
  SPECD_CHECK(p.min_p >= 0 && p.min_p <= 1, "min_p must be in [0, 1] (got {})", p.min_p);
  SPECD_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0,
              "repetition_penalty must be > 0 (got {})", p.repetition_penalty);
  SPECD_CHECK(std::isfinite(p.presence_penalty) && std::abs(p.presence_penalty) <= 2,
              "presence_penalty must be in [-2, 2] (got {})", p.presence_penalty);
  SPECD_CHECK(std::isfinite(p.frequency_penalty) && std::abs(p.frequency_penalty) <= 2,
              "frequency_penalty must be in [-2, 2] (got {})", p.frequency_penalty);
}

void TokenHistory::add(int token) {
  if (counts_.at(token)++ == 0) seen_.push_back(token);
}

void TokenHistory::remove(int token) {
  SPECD_CHECK(counts_.at(token) > 0, "token {} is not in the history", token);
  if (--counts_[token] == 0) seen_.erase(std::find(seen_.begin(), seen_.end(), token));
}

void TokenHistory::clear() {
  for (int token : seen_) counts_[token] = 0;
  seen_.clear();
}

Sampler::Sampler(int vocab_size)
    : vocab_size_(vocab_size), probs_(vocab_size), order_(vocab_size) {}

void Sampler::apply_penalties(std::span<float> logits, const SamplingParams& p,
                              const TokenHistory& prompt, const TokenHistory& output) {
  if (p.repetition_penalty != 1.0) {
    const float penalty = static_cast<float>(p.repetition_penalty);
    auto penalise = [&](int token) {
      float& l = logits[token];
      l = l < 0 ? l * penalty : l / penalty;
    };
    for (int token : prompt.seen()) penalise(token);
    for (int token : output.seen()) {
      if (prompt.count(token) == 0) penalise(token);
    }
  }
  if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) {
    for (int token : output.seen()) {
      logits[token] -= static_cast<float>(p.presence_penalty +
                                          p.frequency_penalty * output.count(token));
    }
  }
}

int Sampler::argmax(std::span<const float> logits) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(logits.size()); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

int Sampler::distribution(std::span<const float> logits, const SamplingParams& p,
                          std::span<float> probs) {
  const int v = vocab_size_;
  const double inv_t = 1.0 / p.temperature;
  // Candidates: all tokens, or those at least as large as the k-th largest logit (ties kept).
  float threshold = -INFINITY;
  if (p.top_k > 0 && p.top_k < v) {
    std::iota(order_.begin(), order_.end(), 0);
    std::nth_element(order_.begin(), order_.begin() + (p.top_k - 1), order_.end(),
                     [&](int a, int b) { return logits[a] > logits[b]; });
    threshold = logits[order_[p.top_k - 1]];
  }
  float max_logit = -INFINITY;
  for (int i = 0; i < v; ++i) max_logit = std::max(max_logit, logits[i]);
  double total = 0;
  int n = 0;
  for (int i = 0; i < v; ++i) {
    if (logits[i] >= threshold && logits[i] > -INFINITY) {
      float e = static_cast<float>(std::exp((static_cast<double>(logits[i]) - max_logit) * inv_t));
      probs[i] = e;
      total += e;
      order_[n++] = i;
    } else {
      probs[i] = 0;
    }
  }
  SPECD_CHECK(n > 0 && total > 0, "no token has a finite logit");
  for (int j = 0; j < n; ++j) probs[order_[j]] = static_cast<float>(probs[order_[j]] / total);

  if (p.top_p < 1.0 || p.min_p > 0.0) {
    auto by_prob = [&](int a, int b) {
      return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
    };
    // Sort a prefix that is large enough for the nucleus, widening if needed.
    int sorted = std::min(n, 256);
    for (;;) {
      std::partial_sort(order_.begin(), order_.begin() + sorted, order_.begin() + n, by_prob);
      double mass = 0;
      for (int j = 0; j < sorted; ++j) mass += probs[order_[j]];
      float min_prob = static_cast<float>(p.min_p) * probs[order_[0]];
      if (sorted == n || mass >= p.top_p || probs[order_[sorted - 1]] < min_prob) break;
      sorted = std::min(n, sorted * 8);
    }
    const float min_prob = static_cast<float>(p.min_p) * probs[order_[0]];
    double cumulative = 0;
    int keep = 0;
    while (keep < sorted && cumulative < p.top_p && probs[order_[keep]] >= min_prob) {
      cumulative += probs[order_[keep]];
      ++keep;
    }
    keep = std::max(keep, 1);
    for (int j = keep; j < n; ++j) probs[order_[j]] = 0;
    double kept = 0;
    for (int j = 0; j < keep; ++j) kept += probs[order_[j]];
    for (int j = 0; j < keep; ++j) probs[order_[j]] = static_cast<float>(probs[order_[j]] / kept);
    n = keep;
  }
  return n;
}

int Sampler::sample_from(std::span<const float> probs, double u) {
  double total = 0;
  for (float p : probs) total += p;
  const double target = u * total;
  double cumulative = 0;
  int last = -1;
  for (int i = 0; i < static_cast<int>(probs.size()); ++i) {
    if (probs[i] == 0) continue;
    cumulative += probs[i];
    last = i;
    if (cumulative > target) return i;
  }
  SPECD_CHECK(last >= 0, "cannot sample from an all-zero distribution");
  return last;
}

int Sampler::sample(std::span<const float> logits, const SamplingParams& p, int64_t position) {
  if (p.greedy()) return argmax(logits);
  distribution(logits, p, probs_);
  return sample_from(probs_, random_uniform(p.seed, position, RandomPurpose::kSample));
}

}  // namespace specd
