// UTF-8 helpers: decoding, encoding, validation and lossy repair (maximal-subpart U+FFFD rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specd::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Byte length of the UTF-8 sequence introduced by `lead` (1 for ASCII and for invalid leads).
inline size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the code point at s[pos] and advances pos. `s` must be valid UTF-8.
inline char32_t next_code_point(std::string_view s, size_t& pos) {
  auto b = static_cast<unsigned char>(s[pos]);
  if (b < 0x80) {
    ++pos;
    return b;
  }
  size_t n = utf8_sequence_length(b);
  char32_t cp = b & (0xFF >> (n + 1));
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

// Decodes the code point that ends at s[pos - 1] and moves pos back. `s` must be valid UTF-8.
inline char32_t prev_code_point(std::string_view s, size_t& pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t p = start;
  char32_t cp = next_code_point(s, p);
  pos = start;
  return cp;
}

// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(std::string& out, char32_t cp);

// Number of code points in valid UTF-8 text.
size_t count_code_points(std::string_view s);

// Length of the longest valid UTF-8 prefix of `s`.
size_t valid_utf8_prefix(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return valid_utf8_prefix(s) == s.size(); }

// Appends `s` to `out`, replacing each maximal invalid subpart with U+FFFD, the rule of the
// Unicode standard (chapter 3, "U+FFFD substitution of maximal subparts") that Python's
// errors="replace" and Rust's String::from_utf8_lossy follow. With `final` false, an
// incomplete sequence at the end that could still become valid is not consumed; the return
// value is the number of bytes of `s` consumed.
size_t append_utf8_lossy(std::string& out, std::string_view s, bool final = true);

// Returns `s` repaired as by append_utf8_lossy.
std::string to_valid_utf8(std::string_view s);

// Largest position <= pos that is not inside a UTF-8 sequence of valid text `s`.
inline size_t floor_char_boundary(std::string_view s, size_t pos) {
  if (pos >= s.size()) return s.size();
  while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

}  // namespace specd::tok
