// UTF-8 code point helpers giving chat templates Python's str semantics (length, slicing, isspace).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace specd::chat {

// Decodes the code point at byte `pos` of valid UTF-8 and advances `pos` past it.
char32_t decode_utf8(std::string_view s, size_t* pos);
// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(char32_t cp, std::string* out);
// True if `s` is well-formed UTF-8 (no overlong forms, no surrogates).
bool is_valid_utf8(std::string_view s);
// Number of code points (Python len()).
size_t utf8_length(std::string_view s);
// The code points of `s`.
std::vector<char32_t> to_code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps, size_t begin, size_t end);
// Byte offset of each code point plus a final entry equal to s.size().
std::vector<size_t> code_point_offsets(std::string_view s);

// Python's str.isspace() for one code point (also what `\s` matches in Python's re).
bool py_isspace(char32_t cp);
// Python's str.splitlines() line boundaries (\n \r \v \f \x1c-\x1e \x85 \u2028 \u2029).
bool py_is_linebreak(char32_t cp);

// str.strip()/lstrip()/rstrip(): with `chars` == nullptr strips Python whitespace, otherwise any
// code point contained in *chars.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

// ASCII-only case mapping (non-ASCII code points are kept as they are).
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
// Python's str.title() and str.capitalize() on ASCII letters.
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

}  // namespace specd::chat
