// Merges from vocabulary scores (see spm_merges.h).
#include "tokenizer/spm_merges.h"

#include <algorithm>
#include <cstdint>

#include "tokenizer/hash_tables.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

namespace {

struct Candidate {
  double key;
  int32_t left;   // id (last occurrence) of the left part
  int32_t right;  // id of the right part
  uint32_t left_chars;
  uint32_t right_chars;
};

}  // namespace

std::vector<std::pair<std::string, std::string>> merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<double>& keys) {
  // Python's {token: index} keeps the last index; {token: score} keeps the first position in
  // iteration order but the last value.
  StringTable last;
  last.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) last.insert(tokens[i], static_cast<int32_t>(i));
  StringTable seen;
  seen.reserve(tokens.size());

  std::vector<Candidate> merges;
  merges.reserve(tokens.size() * 2);
  std::vector<Candidate> local;
  std::vector<size_t> bounds;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    if (seen.find(token)) continue;  // a repeated token: its first position already counted
    seen.insert(token, 1);
    const int32_t final_id = *last.find(token);
    const double key = keys[static_cast<size_t>(final_id)];
    bounds.clear();
    for (size_t pos = 0; pos < token.size();) {
      next_code_point(token, pos);
      bounds.push_back(pos);
    }
    if (bounds.size() < 2) continue;
    local.clear();
    const uint32_t chars = static_cast<uint32_t>(bounds.size());
    for (uint32_t k = 0; k + 1 < chars; ++k) {
      const std::string_view whole(token);
      std::optional<int32_t> left = last.find(whole.substr(0, bounds[k]));
      if (!left) continue;
      std::optional<int32_t> right = last.find(whole.substr(bounds[k]));
      if (!right) continue;
      local.push_back({key, *left, *right, k + 1, chars - k - 1});
    }
    std::sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  // sorted(..., key=(score, len(left), len(right)), reverse=True): stable, descending.
  std::stable_sort(merges.begin(), merges.end(), [](const Candidate& a, const Candidate& b) {
    if (a.key != b.key) return a.key > b.key;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const Candidate& m : merges) {
    out.emplace_back(tokens[static_cast<size_t>(m.left)], tokens[static_cast<size_t>(m.right)]);
  }
  return out;
}

}  // namespace specd::tok
