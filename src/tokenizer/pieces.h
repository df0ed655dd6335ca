// Pieces of text between pre-tokenization steps, and splitting them by delimiter behaviour.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_file.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace specd::tok {

// tokenizers' SplitDelimiterBehavior: what happens to the matched delimiters.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

SplitBehavior parse_split_behavior(const Json& json, std::string_view what);

// One piece: [begin, end) of the list's base text, or of its arena when `in_arena`.
// `at_start` is set when the piece begins at offset 0 of the original input (Metaspace's
// prepend_scheme "first" needs it).
struct Piece {
  size_t begin;
  size_t end;
  bool at_start;
  bool in_arena;
};

// The pieces of one text segment. Splitting only narrows pieces; transforms append new text to
// the arena and repoint the piece, so the input is never copied.
struct PieceList {
  std::string_view base;
  std::string arena;
  std::vector<Piece> pieces;

  std::string_view text(const Piece& piece) const {
    std::string_view source = piece.in_arena ? std::string_view(arena) : base;
    return source.substr(piece.begin, piece.end - piece.begin);
  }
  // Resets to a single piece viewing `text`, which must outlive the list's use.
  void reset(std::string_view text, bool at_start);
  // Replaces the text of `piece` with `text`.
  void set_text(Piece& piece, std::string_view text);
};

// Applies `behavior` to `spans` (covering one piece) and appends the resulting [begin, end)
// ranges, empty ones included (callers drop them), to `out`.
void apply_split_behavior(const std::vector<MatchSpan>& spans, SplitBehavior behavior,
                          std::vector<std::pair<size_t, size_t>>& out);

// Splits every piece of `list`: `find_spans(text, spans)` covers the piece's text with spans,
// which `behavior` turns into sub-pieces; empty sub-pieces are dropped as in tokenizers.
template <typename FindSpans>
void split_pieces(PieceList& list, SplitBehavior behavior, FindSpans&& find_spans) {
  thread_local std::vector<MatchSpan> spans;
  thread_local std::vector<std::pair<size_t, size_t>> ranges;
  std::vector<Piece> result;
  result.reserve(list.pieces.size() * 2);
  for (const Piece& piece : list.pieces) {
    spans.clear();
    ranges.clear();
    find_spans(list.text(piece), spans);
    apply_split_behavior(spans, behavior, ranges);
    for (auto [begin, end] : ranges) {
      if (begin == end) continue;
      result.push_back(
          {piece.begin + begin, piece.begin + end, piece.at_start && begin == 0, piece.in_arena});
    }
  }
  list.pieces = std::move(result);
}

// Spans where each character satisfying `predicate` is a match of its own (tokenizers' char
// predicate patterns).
template <typename Predicate>
void char_predicate_spans(std::string_view text, Predicate&& predicate,
                          std::vector<MatchSpan>& out) {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    char32_t c = next_code_point(text, pos);
    if (predicate(c)) {
      if (last < start) out.push_back({last, start, false});
      out.push_back({start, pos, true});
      last = pos;
    }
  }
  if (last < text.size()) out.push_back({last, text.size(), false});
}

}  // namespace specd::tok
