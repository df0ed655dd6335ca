// The modes `specd bench` compares: plain decoding first, then each `--modes` entry.
#pragma once

#include <string>
#include <vector>

namespace specd::cli {

// One mode: a drafter and, for MODE@K, a fixed draft length.
struct BenchMode {
  std::string name;     // as given, e.g. "draft@4"
  std::string drafter;  // none, ngram, draft, ngram+draft or oracle
  int fixed_k = -1;     // K of MODE@K (0 to kSmallBatch - 1); -1: the adaptive length
};

// "none", then the comma-separated entries of `text` ("none" and empty entries skipped). Throws
// specd::Error naming the entry for an unknown drafter, a K that is not a draft length, or a draft
// model's mode without one (`have_draft`: --draft was given).
std::vector<BenchMode> parse_bench_modes(const std::string& text, bool have_draft);

}  // namespace specd::cli
