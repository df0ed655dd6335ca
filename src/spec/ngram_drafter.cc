// Longest-suffix matching over the context (prompt lookup decoding).
#include "spec/ngram_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "core/timer.h"

namespace specd {

NgramDrafter::NgramDrafter(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {
  SPECD_CHECK(n_min >= 1 && n_max >= n_min, "n-gram sizes must satisfy 1 <= n_min <= n_max");
}

void NgramDrafter::propose(std::span<const int32_t> context, int max_k, const SamplingParams&,
                           DraftProposal& out) {
  double t0 = now_seconds();
  out.tokens.clear();
  out.sampled = false;
  const int64_t n = static_cast<int64_t>(context.size());
  for (int size = std::min<int64_t>(n_max_, n - 1); size >= n_min_ && max_k > 0; --size) {
    const int32_t* suffix = context.data() + n - size;
    // Most recent earlier occurrence: scan start positions from the end backwards.
    for (int64_t at = n - size - 1; at >= 0; --at) {
      if (!std::equal(suffix, suffix + size, context.data() + at)) continue;
      int64_t follow = at + size;
      int64_t count = std::min<int64_t>(max_k, n - follow);
      out.tokens.assign(context.data() + follow, context.data() + follow + count);
      break;
    }
    if (!out.tokens.empty()) break;
  }
  out.seconds = now_seconds() - t0;
}

}  // namespace specd
