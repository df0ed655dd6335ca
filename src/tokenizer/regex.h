// Patterns of tokenizer.json (literal strings and Oniguruma-style regexes) run through PCRE2.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/json_file.h"

namespace specd::tok {

// A span of text [begin, end) and whether it is a match of the pattern.
struct MatchSpan {
  size_t begin;
  size_t end;
  bool is_match;
};

class CompiledRegex;

// A search pattern: a literal string, or a regular expression compiled by PCRE2 (UTF, Unicode
// properties, JIT). Matches are found left to right without overlap; an empty match right
// after the previous match is skipped, as the Oniguruma iterator of `tokenizers` does.
class Pattern {
 public:
  Pattern() = default;
  static Pattern literal(std::string text);
  // A regex in the Oniguruma dialect of tokenizers' SysRegex: `\s` means White_Space and `\w`
  // means letters, marks, numbers and connector punctuation, as Oniguruma defines them.
  static Pattern oniguruma(std::string_view regex);
  // A regex already in PCRE2 syntax.
  static Pattern pcre2(std::string_view regex);
  // {"String": "..."} or {"Regex": "..."}; `what` names the field in errors.
  static Pattern from_json(const Json& json, std::string_view what);

  bool is_literal() const { return regex_ == nullptr; }
  const std::string& literal_text() const { return literal_; }

  // Appends the [begin, end) of every match in `text` (valid UTF-8).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  // Appends spans covering `text`: matches and the text between them (tokenizers'
  // Pattern::find_matches); with `invert`, the match flags are flipped.
  void find_spans(std::string_view text, std::vector<MatchSpan>& out, bool invert = false) const;

 private:
  std::string literal_;
  std::shared_ptr<const CompiledRegex> regex_;
};

// Translates an Oniguruma-dialect regex into PCRE2 syntax (exposed for tests).
std::string translate_oniguruma(std::string_view regex);

// Whether `c` is a word character of Rust's regex crate (`\w`: Alphabetic, M, Nd, Pc,
// Join_Control), used by tokenizers for single_word added tokens.
bool is_regex_word_char(char32_t c);

}  // namespace specd::tok
