// Merges from vocabulary scores (see spm_merges.h).
#include "tokenizer/spm_merges.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "tokenizer/utf8.h"

namespace specd::tok {

namespace {

struct Candidate {
  double key;
  int32_t left;    // id (last occurrence) of the left part
  int32_t right;   // id of the right part
  int32_t merged;  // id of the whole token
  uint32_t left_chars;
  uint32_t right_chars;
};

// Which positions hold the first occurrence of their token (all of them without repeats).
std::vector<bool> first_occurrences(const std::vector<std::string>& tokens,
                                    const StringTable& ids) {
  std::vector<bool> first(tokens.size(), true);
  if (ids.size() == tokens.size()) return first;
  StringTable seen;
  seen.reserve(ids.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (seen.find(tokens[i])) {
      first[i] = false;
    } else {
      seen.insert(tokens[i], 1);
    }
  }
  return first;
}

}  // namespace

StringTable last_ids(const std::vector<std::string>& tokens) {
  StringTable ids;
  ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) ids.insert(tokens[i], static_cast<int32_t>(i));
  return ids;
}

std::vector<std::pair<std::string, std::string>> merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<double>& keys) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const MergeIds& m : merges_from_scores(tokens, keys, last_ids(tokens))) {
    out.emplace_back(tokens[static_cast<size_t>(m.left)], tokens[static_cast<size_t>(m.right)]);
  }
  return out;
}

std::vector<MergeIds> merges_from_scores(const std::vector<std::string>& tokens,
                                         const std::vector<double>& keys, const StringTable& ids) {
  // Python's {token: score} iterates in first-occurrence order but holds the last value.
  const std::vector<bool> first = first_occurrences(tokens, ids);
  const bool no_repeats = ids.size() == tokens.size();

  std::vector<Candidate> merges;
  merges.reserve(tokens.size() * 2);
  // Tokens are processed in blocks: all left parts of a block are looked up in one batch, then
  // the right parts of the left parts found, so that the hash-table misses overlap.
  constexpr size_t kBlock = 2048;
  struct Split {
    uint32_t token;
    uint32_t bytes;  // length of the left part
    uint32_t left_chars, right_chars;
  };
  std::vector<Split> splits;
  std::vector<std::string_view> parts;
  std::vector<int32_t> left_ids, right_ids;
  std::vector<Candidate> local;
  for (size_t begin = 0; begin < tokens.size(); begin += kBlock) {
    const size_t end = std::min(tokens.size(), begin + kBlock);
    splits.clear();
    parts.clear();
    for (size_t i = begin; i < end; ++i) {
      if (!first[i]) continue;
      const std::string& token = tokens[i];
      const size_t split_start = splits.size();
      uint32_t chars = 0;
      for (size_t pos = 0; pos < token.size();) {
        next_code_point(token, pos);
        ++chars;
        if (pos < token.size()) {
          splits.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(pos), chars, 0});
        }
      }
      for (size_t s = split_start; s < splits.size(); ++s) {
        splits[s].right_chars = chars - splits[s].left_chars;
        parts.emplace_back(token.data(), splits[s].bytes);
      }
    }
    left_ids.resize(parts.size());
    ids.find_many(parts.data(), parts.size(), left_ids.data());
    size_t found = 0;
    for (size_t s = 0; s < splits.size(); ++s) {
      if (left_ids[s] < 0) continue;
      const std::string& token = tokens[splits[s].token];
      splits[found] = splits[s];
      left_ids[found] = left_ids[s];
      parts[found++] = std::string_view(token).substr(splits[s].bytes);
    }
    right_ids.resize(found);
    ids.find_many(parts.data(), found, right_ids.data());
    // Per token, its merges sorted by (id of left, id of right), as generate_merges does.
    for (size_t s = 0; s < found;) {
      const uint32_t token = splits[s].token;
      const int32_t final_id = no_repeats ? static_cast<int32_t>(token) : *ids.find(tokens[token]);
      const double key = keys[static_cast<size_t>(final_id)];
      local.clear();
      for (; s < found && splits[s].token == token; ++s) {
        if (right_ids[s] < 0) continue;
        local.push_back({key, left_ids[s], right_ids[s], final_id, splits[s].left_chars,
                         splits[s].right_chars});
      }
      std::sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
        return a.left != b.left ? a.left < b.left : a.right < b.right;
      });
      merges.insert(merges.end(), local.begin(), local.end());
    }
  }
  // sorted(..., key=(score, len(left), len(right)), reverse=True): stable, descending. Keys
  // usually fall with the id already (Gemma's positions always do), so only the runs of equal
  // keys need sorting then.
  const auto by_lengths = [](const Candidate& a, const Candidate& b) {
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  };
  const auto by_key = [](const Candidate& a, const Candidate& b) { return a.key > b.key; };
  if (std::is_sorted(merges.begin(), merges.end(), by_key)) {
    for (auto run = merges.begin(); run != merges.end();) {
      auto run_end =
          std::find_if(run, merges.end(), [&](const Candidate& c) { return c.key != run->key; });
      std::stable_sort(run, run_end, by_lengths);
      run = run_end;
    }
  } else {
    std::stable_sort(merges.begin(), merges.end(), [&](const Candidate& a, const Candidate& b) {
      return a.key != b.key ? a.key > b.key : by_lengths(a, b);
    });
  }
  std::vector<MergeIds> out;
  out.reserve(merges.size());
  for (const Candidate& m : merges) out.push_back({m.left, m.right, m.merged});
  return out;
}

}  // namespace specd::tok
