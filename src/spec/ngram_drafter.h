// Prompt lookup: proposes what followed the longest earlier occurrence of the context's suffix.
#pragma once

#include "spec/drafter.h"

namespace specd {

class NgramDrafter final : public Drafter {
 public:
  // Suffixes of length n_max down to n_min are tried; the most recent match wins.
  NgramDrafter(int n_min = 1, int n_max = 4);
  std::string name() const override { return "ngram"; }
  void propose(std::span<const int32_t> context, int max_k, const SamplingParams& params,
               DraftProposal& out) override;

 private:
  int n_min_, n_max_;
};

}  // namespace specd
