// Tries drafters in order and takes the first non-empty proposal (n-gram, then the draft model).
#pragma once

#include <vector>

#include "spec/drafter.h"

namespace specd {

class ChainedDrafter final : public Drafter {
 public:
  explicit ChainedDrafter(std::vector<Drafter*> drafters) : drafters_(std::move(drafters)) {}
  std::string name() const override;
  void reset() override;
  void prefill(std::span<const int32_t> prompt) override;
  void warm_up() override;
  void propose(std::span<const int32_t> context, int max_k, const SamplingParams& params,
               DraftProposal& out) override;
  bool uses_model() const override;
  void device_tokens_read(std::span<const int32_t> tokens) override;

 private:
  std::vector<Drafter*> drafters_;
  Drafter* proposer_ = nullptr;  // the drafter whose proposal was taken last
};

// Proposes a known continuation (for example the target's own greedy output): every token is
// accepted, which measures the loop's overhead against the ideal speedup.
class OracleDrafter final : public Drafter {
 public:
  // `sequence` = prompt followed by the reference output.
  explicit OracleDrafter(std::vector<int32_t> sequence) : sequence_(std::move(sequence)) {}
  std::string name() const override { return "oracle"; }
  void propose(std::span<const int32_t> context, int max_k, const SamplingParams& params,
               DraftProposal& out) override;

 private:
  std::vector<int32_t> sequence_;
};

}  // namespace specd
