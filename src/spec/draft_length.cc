// Online acceptance and cost estimates for the draft-length choice.
#include "spec/draft_length.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"

namespace specd {

namespace {
constexpr double kAcceptanceDecay = 0.95;  // weight of the past per round (content changes)
constexpr double kCostDecay = 0.99;        // costs change slowly (context length)
constexpr long kExploreEvery = 8;          // rounds between steps off the best length
constexpr double kOutlier = 3.0;           // cost samples above this times the fit are skipped
constexpr int kOutliersToAccept = 3;       // ... unless this many rounds in a row are
constexpr double kPriorWeight = 2.0;       // rounds' worth of weight of an acceptance prior
// Rounds' worth of timings of a row count after which its own mean stands for it instead of
// the linear fit (verification costs can jump where a kernel takes another pass over the weights).
constexpr double kSeenRounds = 2.0;
constexpr double kCarriedRounds = 4.0;  // rounds' worth of acceptance a next request starts with
// Lengths of a policy's first rounds, while it cannot fit its costs yet (clamped to the range):
// spread so that both fits see a slope within a few rounds, each length twice, so that a
// length's first round (which may record a CUDA graph, and is then left out as an outlier) is
// followed by a typical one. The first round of all is not recorded.
constexpr int kWarmUp[] = {3, 3, 1, 1, 5, 5};
}  // namespace

void DecayedLinearFit::add(double x, double y) {
  n_ = n_ * decay_ + 1;
  sx_ = sx_ * decay_ + x;
  sy_ = sy_ * decay_ + y;
  sxx_ = sxx_ * decay_ + x * x;
  sxy_ = sxy_ * decay_ + x * y;
}

bool DecayedLinearFit::fit(double* a, double* b) const {
  const double spread = n_ * sxx_ - sx_ * sx_;  // n^2 times the variance of x
  if (n_ < 3 || spread < 0.01 * n_ * n_) return false;
  *b = (n_ * sxy_ - sx_ * sy_) / spread;
  *a = (sy_ - *b * sx_) / n_;
  return true;
}

DraftLengthPolicy::DraftLengthPolicy(const DraftLengthOptions& options)
    : options_(options), draft_(kCostDecay), verify_(kCostDecay) {
  SPECD_CHECK(options.min_k >= 0 && options.max_k >= options.min_k,
              "draft lengths must satisfy 0 <= draft-min <= draft-max");
  SPECD_CHECK(options.fixed_k >= 0, "--draft-fixed must be >= 0");
  int n = std::max(options.max_k, options.fixed_k) + 1;
  verify_at_.assign(n + 1, DecayedMean{});
  reached_.assign(n, 0);
  accepted_.assign(n, 0);
}

double DraftLengthPolicy::acceptance(int position) const {
  // Smoothed towards the position before (0.75 before the first: optimistic, so that drafting
  // gets tried): a position rarely reached takes its neighbour's rate instead of a fixed prior,
  // which would make every length past the usual one look worse than it is.
  double prior = 0.75;
  for (int i = 1; i <= position; ++i) {
    prior = (accepted_[i] + kPriorWeight * prior) / (reached_[i] + kPriorWeight);
  }
  return prior;
}

double DraftLengthPolicy::draft_seconds(int k) const {
  if (k == 0 || draft_.empty()) return 0;  // nothing known yet: drafting looks free
  double a = 0, b = 0;
  if (draft_.fit(&a, &b)) return std::max(0.0, a) + std::max(0.0, b) * k;
  return draft_.mean_y() * k / draft_.mean_x();  // one length seen: proportional to it
}

double DraftLengthPolicy::verify_seconds(int rows) const {
  if (rows < static_cast<int>(verify_at_.size()) && verify_at_[rows].weight >= kSeenRounds) {
    return verify_at_[rows].sum / verify_at_[rows].weight;
  }
  double a = 0, b = 0;
  if (verify_.fit(&a, &b)) return std::max(1e-9, a) + std::max(0.0, b) * rows;
  return verify_.empty() ? 1.0 : verify_.mean_y();  // one row count seen: assume it flat
}

int DraftLengthPolicy::best_length() const {
  int best_k = options_.min_k;
  double best_rate = -1, expected = 1, chain = 1;
  for (int k = 0; k <= options_.max_k; ++k) {
    if (k > 0) {
      chain *= acceptance(k);
      expected += chain;
    }
    if (k < options_.min_k) continue;
    const double rate = expected / (draft_seconds(k) + verify_seconds(k + 1));
    if (rate > best_rate) {
      best_rate = rate;
      best_k = k;
    }
  }
  return best_k;
}

DraftLengthPolicy DraftLengthPolicy::next_request() const {
  DraftLengthPolicy next = *this;
  const double weight = reached_.size() > 1 ? reached_[1] : 0;
  if (weight > kCarriedRounds) {
    for (auto* v : {&next.reached_, &next.accepted_}) {
      for (double& x : *v) x *= kCarriedRounds / weight;
    }
  }
  next.rounds_ = 0;
  next.recorded_ = 0;
  next.outliers_in_row_ = 0;
  return next;
}

int DraftLengthPolicy::choose() {
  if (options_.fixed_k > 0) return options_.fixed_k;
  if (warm_up_ < static_cast<int>(std::size(kWarmUp)) && !(draft_.can_fit() && verify_.can_fit())) {
    return std::clamp(kWarmUp[warm_up_++], options_.min_k, options_.max_k);
  }
  const int best = best_length();
  if (++rounds_ % kExploreEvery != 0 || options_.min_k == options_.max_k) return best;
  // Alternately one longer and one shorter (the other way at the ends of the range).
  const bool up = (rounds_ / kExploreEvery) % 2 == 1;
  if (up) return best < options_.max_k ? best + 1 : best - 1;
  return best > options_.min_k ? best - 1 : best + 1;
}

void DraftLengthPolicy::record(int drafted, int accepted, double draft_time, int verify_rows,
                               double verify_time) {
  for (auto* v : {&reached_, &accepted_}) {
    for (double& x : *v) x *= kAcceptanceDecay;
  }
  for (int i = 1; i <= drafted && i < static_cast<int>(reached_.size()); ++i) {
    reached_[i] += 1;
    if (i <= accepted) accepted_[i] += 1;
    if (i > accepted) break;  // positions after the first rejection were never judged
  }
  // The first round follows the prompt's prefill (caches cold): its costs are not typical. Nor
  // are single times far above the fit's (one-time work such as recording a CUDA graph for a
  // new row count); a few in a row mean the costs have changed, and are kept.
  if (++recorded_ == 1) return;
  const bool outlier =
      (drafted > 0 && !draft_.empty() && draft_time > kOutlier * draft_seconds(drafted)) ||
      (!verify_.empty() && verify_time > kOutlier * verify_seconds(verify_rows));
  outliers_in_row_ = outlier ? outliers_in_row_ + 1 : 0;
  if (outlier && outliers_in_row_ < kOutliersToAccept) return;
  if (outlier) {  // the costs have changed: rounds from before would bend the new fits
    draft_ = DecayedLinearFit(kCostDecay);
    verify_ = DecayedLinearFit(kCostDecay);
    for (DecayedMean& m : verify_at_) m = {};
  }
  if (drafted > 0) draft_.add(drafted, draft_time);
  verify_.add(verify_rows, verify_time);
  for (DecayedMean& m : verify_at_) m.sum *= kCostDecay, m.weight *= kCostDecay;
  if (verify_rows < static_cast<int>(verify_at_.size())) {
    verify_at_[verify_rows].sum += verify_time;
    verify_at_[verify_rows].weight += 1;
  }
}

}  // namespace specd
