// Greedy and speculative-sampling acceptance (Leviathan et al. 2023; Chen et al. 2023).
#include "spec/verifier.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "sample/philox.h"

namespace specd {

Verifier::Verifier(int vocab_size)
    : vocab_(vocab_size), sampler_(vocab_size), row_(vocab_size), probs_(vocab_size) {}

void Verifier::verify(const float* logits, const DraftProposal& draft, const SamplingParams& params,
                      int64_t position, const TokenHistory& prompt, TokenHistory& output,
                      VerifyResult& result) {
  result.accepted = 0;
  result.emitted.clear();
  const int k = static_cast<int>(draft.tokens.size());
  for (int i = 0; i <= k; ++i) {
    std::memcpy(row_.data(), logits + static_cast<size_t>(i) * vocab_, vocab_ * sizeof(float));
    if (params.has_penalties()) Sampler::apply_penalties(row_, params, prompt, output);
    const int64_t pos = position + i;
    const bool bonus = i == k;
    int32_t token;
    if (params.greedy()) {
      token = Sampler::argmax(row_);
    } else {
      sampler_.distribution(row_, params, probs_);
      const int32_t proposed = bonus ? -1 : draft.tokens[i];
      if (bonus || !draft.sampled) {
        // Plain decoding's own draw at this position; a point mass is accepted iff it matches.
        token =
            Sampler::sample_from(probs_, random_uniform(params.seed, pos, RandomPurpose::kSample));
      } else {
        const float* q = draft.probs.data() + static_cast<size_t>(i) * vocab_;
        double p_x = probs_[proposed], q_x = q[proposed];
        double u = random_uniform(params.seed, pos, RandomPurpose::kAccept);
        if (q_x > 0 && u * q_x < p_x) {
          token = proposed;
        } else {
          // Residual distribution norm(max(0, p - q)).
          for (int t = 0; t < vocab_; ++t) probs_[t] = std::max(0.0f, probs_[t] - q[t]);
          double mass = 0;
          for (float r : probs_) mass += r;
          if (mass <= 0) {  // p == q up to rounding: any draw from p is exact
            sampler_.distribution(row_, params, probs_);
          }
          token = Sampler::sample_from(probs_,
                                       random_uniform(params.seed, pos, RandomPurpose::kResample));
        }
      }
    }
    output.add(token);
    result.emitted.push_back(token);
    // A token equal to the proposal continues the chain (the later proposals were drawn given
    // it); anything else ends the round.
    if (bonus || token != draft.tokens[i]) break;
    ++result.accepted;
  }
}

void Verifier::verify_tokens(const int32_t* targets, const DraftProposal& draft,
                             TokenHistory& output, VerifyResult& result) {
  result.accepted = 0;
  result.emitted.clear();
  const int k = static_cast<int>(draft.tokens.size());
  for (int i = 0; i <= k; ++i) {
    SPECD_CHECK(targets[i] >= 0, "no token has a finite logit");  // a device draw found none
    output.add(targets[i]);
    result.emitted.push_back(targets[i]);
    if (i == k || targets[i] != draft.tokens[i]) break;
    ++result.accepted;
  }
}

RowSampling device_draw(const SamplingParams& params, int64_t position, RandomPurpose purpose) {
  return {params.temperature, params.top_k, params.top_p, params.min_p,
          random_uniform(params.seed, position, purpose)};
}

SampledDraft device_verify_inputs(const DraftProposal& draft, const SamplingParams& params,
                                  int64_t position, std::span<double> u_accept,
                                  std::span<double> u_resample, RowSampling* bonus) {
  const size_t k = static_cast<size_t>(draft.size());
  SPECD_CHECK(u_accept.size() >= k && u_resample.size() >= k, "uniform buffers of {} for {}",
              u_accept.size(), k);
  for (size_t i = 0; i < k; ++i) {
    u_accept[i] = random_uniform(params.seed, position + i, RandomPurpose::kAccept);
    u_resample[i] = random_uniform(params.seed, position + i, RandomPurpose::kResample);
  }
  *bonus = device_draw(params, position + static_cast<int64_t>(k), RandomPurpose::kSample);
  return {.k = static_cast<int64_t>(k),
          .tokens = draft.tokens,
          .device_tokens = draft.device_tokens,
          .q = &draft.device_probs,
          .u_accept = u_accept.first(k),
          .u_resample = u_resample.first(k)};
}

}  // namespace specd
