// Delimiter behaviours of tokenizers' NormalizedString::split.
#include "tokenizer/pieces.h"

#include <algorithm>

#include "core/error.h"

namespace specd::tok {

SplitBehavior parse_split_behavior(const Json& json, std::string_view what) {
  SPECD_CHECK(json.is_string(), "{}: behavior must be a string", what);
  std::string name = json.get<std::string>();
  // tokenizers accepts both the PascalCase and the snake_case spelling.
  if (name == "Removed" || name == "removed") return SplitBehavior::kRemoved;
  if (name == "Isolated" || name == "isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious" || name == "merged_with_previous") {
    return SplitBehavior::kMergedWithPrevious;
  }
  if (name == "MergedWithNext" || name == "merged_with_next") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous" || name == "contiguous") return SplitBehavior::kContiguous;
  fail("{}: unknown split behavior '{}'", what, name);
}

void PieceList::reset(std::string_view text, bool at_start) {
  base = text;
  arena.clear();
  pieces.clear();
  pieces.push_back({0, text.size(), at_start, false});
}

void PieceList::set_text(Piece& piece, std::string_view text) {
  size_t begin = arena.size();
  arena.append(text);
  piece.begin = begin;
  piece.end = arena.size();
  piece.in_arena = true;
}

void apply_split_behavior(const std::vector<MatchSpan>& spans, SplitBehavior behavior,
                          std::vector<std::pair<size_t, size_t>>& out) {
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const MatchSpan& s : spans) out.emplace_back(s.begin, s.end);
      return;
    case SplitBehavior::kRemoved:
      for (const MatchSpan& s : spans) {
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      }
      return;
    case SplitBehavior::kContiguous: {
      size_t first = out.size();
      bool previous_match = false;
      for (const MatchSpan& s : spans) {
        if (s.is_match == previous_match && out.size() > first) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      return;
    }
    case SplitBehavior::kMergedWithPrevious: {
      size_t first = out.size();
      bool previous_match = false;
      for (const MatchSpan& s : spans) {
        if (s.is_match && !previous_match && out.size() > first) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      size_t first = out.size();
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && out.size() > first) {
          out.back().first = it->begin;
        } else {
          out.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      return;
    }
  }
}

}  // namespace specd::tok
