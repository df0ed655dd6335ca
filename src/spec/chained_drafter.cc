// Chained and oracle drafters.
#include "spec/chained_drafter.h"

#include <algorithm>

#include "core/timer.h"

namespace specd {

std::string ChainedDrafter::name() const {
  std::string out;
  for (const Drafter* d : drafters_) out += (out.empty() ? "" : "+") + d->name();
  return out;
}

void ChainedDrafter::reset() {
  for (Drafter* d : drafters_) d->reset();
}

void ChainedDrafter::prefill(std::span<const int32_t> prompt) {
  for (Drafter* d : drafters_) d->prefill(prompt);
}

void ChainedDrafter::warm_up() {
  for (Drafter* d : drafters_) d->warm_up();
}

bool ChainedDrafter::uses_model() const {
  return std::any_of(drafters_.begin(), drafters_.end(),
                     [](Drafter* d) { return d->uses_model(); });
}

void ChainedDrafter::propose(std::span<const int32_t> context, int max_k,
                             const SamplingParams& params, DraftProposal& out) {
  double seconds = 0, prefill_seconds = 0;
  for (Drafter* d : drafters_) {
    out.prefill_seconds = 0;
    d->propose(context, max_k, params, out);
    seconds += out.seconds;
    prefill_seconds += out.prefill_seconds;
    proposer_ = d;
    if (out.size() > 0) break;
  }
  out.seconds = seconds;
  out.prefill_seconds = prefill_seconds;
}

void ChainedDrafter::device_tokens_read(std::span<const int32_t> tokens) {
  if (proposer_ != nullptr) proposer_->device_tokens_read(tokens);
}

void OracleDrafter::propose(std::span<const int32_t> context, int max_k, const SamplingParams&,
                            DraftProposal& out) {
  double start = now_seconds();
  out.tokens.clear();
  out.sampled = false;
  size_t from = context.size();
  if (from <= sequence_.size() && std::equal(context.begin(), context.end(), sequence_.begin())) {
    size_t count = std::min<size_t>(max_k, sequence_.size() - from);
    out.tokens.assign(sequence_.begin() + from, sequence_.begin() + from + count);
  }
  out.seconds = now_seconds() - start;
}

}  // namespace specd
