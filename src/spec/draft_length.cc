// Online acceptance and cost estimates for the draft-length choice.
#include "spec/draft_length.h"

#include <algorithm>

#include "core/error.h"

namespace specd {

namespace {
constexpr double kDecay = 0.95;  // weight of the past per round
}

DraftLengthPolicy::DraftLengthPolicy(const DraftLengthOptions& options) : options_(options) {
  SPECD_CHECK(options.min_k >= 0 && options.max_k >= options.min_k,
              "draft lengths must satisfy 0 <= draft-min <= draft-max");
  SPECD_CHECK(options.fixed_k >= 0, "--draft-fixed must be >= 0");
  int n = std::max(options.max_k, options.fixed_k) + 1;
  reached_.assign(n, 0);
  accepted_.assign(n, 0);
}

double DraftLengthPolicy::acceptance(int position) const {
  // Laplace-smoothed, optimistic at the start so that drafting gets tried.
  return (accepted_[position] + 1.5) / (reached_[position] + 2.0);
}

int DraftLengthPolicy::choose() const {
  if (options_.fixed_k > 0) return options_.fixed_k;
  const double draft_cost = draft_tokens_ > 0 ? draft_seconds_ / draft_tokens_ : 0;
  // Verification cost per rows from the fit; before enough data, assume it is flat.
  double slope = 0, intercept = 1;
  const double denom = n_ * sxx_ - sx_ * sx_;
  if (n_ > 2 && denom > 1e-12) {
    slope = std::max(0.0, (n_ * sxy_ - sx_ * sy_) / denom);
    intercept = std::max(1e-9, (sy_ - slope * sx_) / n_);
  } else if (n_ > 0) {
    intercept = sy_ / n_;
  }
  int best_k = options_.min_k;
  double best_rate = -1, expected = 1, chain = 1;
  for (int k = 0; k <= options_.max_k; ++k) {
    if (k > 0) {
      chain *= acceptance(k);
      expected += chain;
    }
    if (k < options_.min_k) continue;
    double seconds = k * draft_cost + intercept + slope * (k + 1);
    double rate = expected / seconds;
    if (rate > best_rate) {
      best_rate = rate;
      best_k = k;
    }
  }
  return best_k;
}

void DraftLengthPolicy::record(int drafted, int accepted, double draft_seconds, int verify_rows,
                               double verify_seconds) {
  for (auto* v : {&reached_, &accepted_}) {
    for (double& x : *v) x *= kDecay;
  }
  for (int i = 1; i <= drafted && i < static_cast<int>(reached_.size()); ++i) {
    reached_[i] += 1;
    if (i <= accepted) accepted_[i] += 1;
    if (i > accepted) break;  // positions after the first rejection were never judged
  }
  if (drafted > 0) {
    draft_seconds_ = draft_seconds_ * kDecay + draft_seconds;
    draft_tokens_ = draft_tokens_ * kDecay + drafted;
  }
  n_ = n_ * kDecay + 1;
  sx_ = sx_ * kDecay + verify_rows;
  sy_ = sy_ * kDecay + verify_seconds;
  sxx_ = sxx_ * kDecay + static_cast<double>(verify_rows) * verify_rows;
  sxy_ = sxy_ * kDecay + verify_rows * verify_seconds;
}

}  // namespace specd
