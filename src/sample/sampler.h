// Turns one row of logits into a token: penalties, temperature, top-k, top-p, min-p, then a draw.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/philox.h"
#include "sample/sampling_params.h"

namespace specd {

// Counts of the tokens generated so far (and the prompt, for repetition penalty), kept
// incrementally so applying penalties costs O(distinct tokens), not O(history).
class TokenHistory {
 public:
  explicit TokenHistory(int vocab_size) : counts_(vocab_size, 0) {}
  void add(int token);
  void remove(int token);  // rollback of a rejected token
  void clear();
  const std::vector<int>& seen() const { return seen_; }  // distinct tokens, first-seen order
  int count(int token) const { return counts_[token]; }

 private:
  std::vector<int> counts_;  // [vocab]
  std::vector<int> seen_;
};

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  // Applies the penalties in place to `logits` ([vocab] f32): the repetition penalty over prompt
  // and output tokens (as transformers), presence/frequency over output tokens (as OpenAI).
  static void apply_penalties(std::span<float> logits, const SamplingParams& params,
                              const TokenHistory& prompt, const TokenHistory& output);

  // The processed distribution: writes probabilities of the candidate tokens after temperature
  // and the top-k/top-p/min-p filters (others are zero). Returns the number of candidates.
  // `probs` is [vocab] f32, `logits` already penalised. Not for greedy params.
  int distribution(std::span<const float> logits, const SamplingParams& params,
                   std::span<float> probs);

  // Samples a token: argmax when greedy, else an inverse-CDF draw from distribution() with the
  // counter-based uniform for (seed, position, kSample).
  int sample(std::span<const float> logits, const SamplingParams& params, int64_t position);

  static int argmax(std::span<const float> logits);
  // Inverse-CDF draw from `probs` (in token order) with a uniform u in [0, 1).
  static int sample_from(std::span<const float> probs, double u);

 private:
  int vocab_size_;
  std::vector<float> probs_;        // [vocab]
  std::vector<int32_t> order_;      // [vocab] candidate ids sorted by probability
};

}  // namespace specd
