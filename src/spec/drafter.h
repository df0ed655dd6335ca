// The contract every drafter implements: propose a chain of tokens continuing the context.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "sample/sampling_params.h"

namespace specd {

class Backend;

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
  // Set by the caller when its verification can read draft tokens on verify_device: a drafter
  // whose chain ends there may then leave the tokens there instead of waiting for them,
  // `device_count` of them at `device_tokens` (i32), with `tokens` empty. The caller reads them
  // with verification's result, puts them in `tokens` and calls Drafter::device_tokens_read.
  bool device_tokens_ok = false;
  const int32_t* device_tokens = nullptr;
  int device_count = 0;
  // The backend whose queue still holds the work that wrote device_tokens and device_probs (the
  // caller makes verification wait for it: Backend::wait_for), or nullptr.
  Backend* queued_on = nullptr;
  // Forgets the last proposal (tokens, q on the device, device tokens, times); keeps the caller's
  // settings (verify_device, device_tokens_ok) and the buffers.
  void clear() {
    tokens.clear();
    device_probs = Tensor{};
    device_tokens = nullptr;
    device_count = 0;
    queued_on = nullptr;
    seconds = 0;
    prefill_seconds = 0;
  }
  // How many tokens were proposed, wherever they are.
  int size() const {
    return device_tokens != nullptr ? device_count : static_cast<int>(tokens.size());
  }
  double seconds = 0;  // time spent proposing
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
  // The values of the tokens the last proposal left on the device (DraftProposal::
  // device_tokens), read by the caller; must come before the next proposal.
  virtual void device_tokens_read(std::span<const int32_t> /*tokens*/) {}
  // Runs each forward shape proposing may use once (see Transformer::run_shapes), then forgets
  // the state. Run twice before the first request, it has a backend that records forwards record
  // them. A drafter without a model has nothing to run.
  virtual void warm_up() {}
  // Whether proposing costs model forwards (used by the draft-length policy).
  virtual bool uses_model() const { return false; }
};

}  // namespace specd
