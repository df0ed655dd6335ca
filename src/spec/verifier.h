// Verification: which draft tokens the target accepts, plus one corrected or bonus token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "sample/philox.h"
#include "sample/sampler.h"
#include "spec/drafter.h"

namespace specd {

struct VerifyResult {
  int accepted = 0;              // draft tokens accepted (a prefix of the proposal)
  std::vector<int32_t> emitted;  // the accepted tokens followed by the corrected/bonus token
};

// At T = 0: the longest prefix equal to the target's argmax, then the target's token.
// At T > 0: speculative sampling (accept x with probability min(1, p(x)/q(x)); on rejection
// sample norm(max(0, p - q)); after full acceptance the bonus token from p). Point-mass proposals
// (q = δ(x)) are verified by drawing the target's token exactly as plain decoding does at that
// position and accepting when it equals the proposal, so the output equals plain decoding draw
// for draw. Penalties are applied row by row with the history of the tokens accepted so far.
class Verifier {
 public:
  explicit Verifier(int vocab_size);

  // logits: [k + 1, vocab] host f32, row i predicts the token at `position + i`. The histories
  // gain every emitted token.
  void verify(const float* logits, const DraftProposal& draft, const SamplingParams& params,
              int64_t position, const TokenHistory& prompt, TokenHistory& output,
              VerifyResult& result);
  // Verification from the target's choices (targets[i]: row i's token, k + 1 of them; -1: no
  // finite logit) for point-mass proposals without penalties: the argmax of each row when greedy,
  // plain decoding's draw at each row's position when sampling. The same result as verify() on
  // the logits.
  static void verify_tokens(const int32_t* targets, const DraftProposal& draft,
                            TokenHistory& output, VerifyResult& result);

 private:
  int vocab_;
  Sampler sampler_;
  std::vector<float> row_;    // [vocab] penalised logits
  std::vector<float> probs_;  // [vocab] p
};

// A row for Backend::sample_rows that draws as the host samplers do: `params` with the uniform
// of `purpose` at `position`.
RowSampling device_draw(const SamplingParams& params, int64_t position, RandomPurpose purpose);

// Backend::verify_sampled's inputs for the sampled draft `draft` (q on the device) whose first
// token sits at `position`, with Verifier::verify's uniforms: they are written to u_accept and
// u_resample ([>= k]) and *bonus gets the draw of row k.
SampledDraft device_verify_inputs(const DraftProposal& draft, const SamplingParams& params,
                                  int64_t position, std::span<double> u_accept,
                                  std::span<double> u_resample, RowSampling* bonus);

}  // namespace specd
