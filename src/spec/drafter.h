// The contract every drafter implements: propose a chain of tokens continuing the context.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "sample/sampling_params.h"

namespace specd {

// A chain of proposed tokens and, for sampled proposals, the distribution each was drawn from.
struct DraftProposal {
  std::vector<int32_t> tokens;  // [k] (capacity max_k, reserved once)
  // Row i: the draft distribution q_i over the target vocabulary ([max_k, vocab] f32), valid
  // for i < tokens.size() when `sampled`; otherwise the proposals are point masses.
  std::vector<float> probs;
  bool sampled = false;
  // Where verification runs (the caller sets it): a drafter that samples on that device may
  // leave q there, in `device_probs` ([k, vocab] f32), instead of in `probs`.
  Device verify_device{};
  Tensor device_probs;  // empty (data == nullptr) when q is in `probs`
  double seconds = 0;   // time spent proposing
  // Of `seconds`: prefilling a fresh context (once per request, not a cost of every round).
  double prefill_seconds = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Forgets any state from a previous request.
  virtual void reset() {}
  // Reads a fresh request's prompt ahead of the first proposal, as part of prompt processing
  // (a drafter with a model runs it through the model; propose would otherwise do it in the
  // first round). Optional: propose always catches up on whatever is missing.
  virtual void prefill(std::span<const int32_t> /*prompt*/) {}
  // Proposes up to `max_k` tokens that continue `context` (prompt + committed output). The
  // drafter keeps itself in sync with the context (for example by rolling back its own KV
  // cache to the longest common prefix), so it needs no separate commit call.
  virtual void propose(std::span<const int32_t> context, int max_k, const SamplingParams& params,
                       DraftProposal& out) = 0;
  // Runs each forward shape proposing may use once (see Transformer::run_shapes), then forgets
  // the state. Run twice before the first request, it has a backend that records forwards record
  // them. A drafter without a model has nothing to run.
  virtual void warm_up() {}
  // Whether proposing costs model forwards (used by the draft-length policy).
  virtual bool uses_model() const { return false; }
};

}  // namespace specd
