// Chooses the draft length each round to maximise expected tokens per second.
#pragma once

#include <vector>

namespace specd {

struct DraftLengthOptions {
  int min_k = 1;
  int max_k = 8;
  int fixed_k = 0;  // > 0: always this length (adaptation off)
};

// Exponentially decayed least-squares fit of y = a + b * x.
class DecayedLinearFit {
 public:
  explicit DecayedLinearFit(double decay) : decay_(decay) {}
  void add(double x, double y);
  // Fits a and b when the x seen so far spread enough to tell a slope; returns false otherwise.
  bool fit(double* a, double* b) const;
  bool can_fit() const {
    double a = 0, b = 0;
    return fit(&a, &b);
  }
  double mean_x() const { return n_ > 0 ? sx_ / n_ : 0; }
  double mean_y() const { return n_ > 0 ? sy_ / n_ : 0; }
  bool empty() const { return n_ == 0; }

 private:
  double decay_;
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

// Keeps exponentially decayed estimates of the acceptance probability at each draft position
// (given the earlier ones were accepted), and of the costs as linear fits: drafting k tokens
// takes a_d + b_d * k (a draft model's first step also runs the tokens accepted last round) and
// verifying r rows a_v + b_v * r, or the decayed mean of r rows' own times once a few rounds
// have verified r rows (costs can jump where a kernel takes another pass). Expected tokens of a
// round with k drafts is 1 + sum_{j<=k} prod_{i<=j} alpha_i; its time is draft(k) + verify(k + 1).
// Every few rounds the length steps one off the best, so that the fits see more than one length.
// Until the fits have seen enough, a fresh policy tries a spread of lengths.
class DraftLengthPolicy {
 public:
  explicit DraftLengthPolicy(const DraftLengthOptions& options);
  // The policy for the next request of the same drafter and target: the cost fits as they are
  // (they belong to the models and the machine), acceptance as a prior of a few rounds' weight
  // (it depends on the text), the request's own counts reset.
  DraftLengthPolicy next_request() const;
  int choose();
  // One round's outcome and times; `draft_time` should leave out one-time work (prefilling a
  // fresh context).
  void record(int drafted, int accepted, double draft_time, int verify_rows, double verify_time);
  double acceptance(int position) const;  // alpha at 1-based draft position
  // Expected seconds of drafting k tokens and of verifying `rows` rows, from the fits.
  double draft_seconds(int k) const;
  double verify_seconds(int rows) const;

 private:
  int best_length() const;

  DraftLengthOptions options_;
  std::vector<double> reached_, accepted_;  // decayed counts per draft position
  DecayedLinearFit draft_, verify_;
  struct DecayedMean {
    double sum = 0, weight = 0;
  };
  std::vector<DecayedMean> verify_at_;  // verification times by row count, decayed as the fit
  long rounds_ = 0, recorded_ = 0;
  int outliers_in_row_ = 0;
  int warm_up_ = 0;  // rounds of the warm-up lengths chosen
};

}  // namespace specd
