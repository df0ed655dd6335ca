// Chooses the draft length each round to maximise expected tokens per second.
#pragma once

#include <vector>

namespace specd {

struct DraftLengthOptions {
  int min_k = 1;
  int max_k = 8;
  int fixed_k = 0;  // > 0: always this length (adaptation off)
};

// Keeps exponentially decayed estimates of the acceptance probability at each draft position
// (given the earlier ones were accepted), the draft cost per token, and the verification cost as
// a linear fit cost(rows) = a + b * rows. Expected tokens of a round with k drafts is
// 1 + sum_{j<=k} prod_{i<=j} alpha_i; its time is k * draft_cost + cost(k + 1).
class DraftLengthPolicy {
 public:
  explicit DraftLengthPolicy(const DraftLengthOptions& options);
  int choose() const;
  void record(int drafted, int accepted, double draft_seconds, int verify_rows,
              double verify_seconds);
  double acceptance(int position) const;  // alpha at 1-based draft position

 private:
  DraftLengthOptions options_;
  std::vector<double> reached_, accepted_;  // decayed counts per draft position
  double draft_seconds_ = 0, draft_tokens_ = 0;
  // Decayed sums for the least-squares fit of verify time against rows.
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

}  // namespace specd
