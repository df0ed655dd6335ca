// Number and string literals inside template tags: jinja2's float and integer patterns, and
// string escapes decoded as Python's "unicode-escape" codec does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specd::chat {

// Length of the float / integer literal at src[pos] (0 if none), as jinja2's float_re and
// integer_re match them (underscores between digits, 0b/0o/0x prefixes).
size_t match_float_literal(std::string_view src, size_t pos);
size_t match_integer_literal(std::string_view src, size_t pos);
// The value of a matched integer literal; false if it does not fit in 64 bits.
bool parse_integer_literal(std::string_view text, int64_t* value);
double parse_float_literal(std::string_view text);

struct StringLiteral {
  std::string value;  // decoded
  size_t end = 0;     // position after the closing quote
  int newlines = 0;   // newlines inside the literal
  std::string error;  // non-empty if the literal is malformed
};
// Scans the quoted string that starts at src[pos] (a ' or ").
StringLiteral scan_string_literal(std::string_view src, size_t pos);

}  // namespace specd::chat
