// Number and string literals inside template tags: jinja2's float and integer patterns, and
// string escapes decoded as Python's "unicode-escape" codec does.
#include "chat/literals.h"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "chat/utf8.h"

namespace specd::chat {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Digits with single underscores between them, as in `(\d+_)*\d+`.
size_t match_digits(std::string_view src, size_t p) {
  size_t end = p;
  while (end < src.size() && is_digit(src[end])) {
    ++end;
    while (end < src.size() && is_digit(src[end])) ++end;
    if (end + 1 < src.size() && src[end] == '_' && is_digit(src[end + 1])) ++end;
  }
  return end - p;
}

int hex_value(std::string_view src, size_t p, int digits) {
  int v = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = p + i < src.size() ? static_cast<char>(src[p + i] | 0x20) : 0;
    if (is_digit(c)) {
      v = v * 16 + (c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = v * 16 + (c - 'a' + 10);
    } else {
      return -1;
    }
  }
  return v;
}

}  // namespace

size_t match_float_literal(std::string_view src, size_t pos) {
  if (pos > 0 && src[pos - 1] == '.') return 0;  // (?<!\.)
  const size_t p = pos + match_digits(src, pos);
  if (p == pos) return 0;
  const auto exponent = [&](size_t q) -> size_t {
    if (q >= src.size() || (src[q] != 'e' && src[q] != 'E')) return 0;
    ++q;
    if (q < src.size() && (src[q] == '+' || src[q] == '-')) ++q;
    const size_t d = match_digits(src, q);
    return d == 0 ? 0 : q + d;
  };
  if (p < src.size() && src[p] == '.') {
    const size_t d = match_digits(src, p + 1);
    if (d > 0) {
      const size_t with_fraction = p + 1 + d;
      const size_t e = exponent(with_fraction);
      return (e > 0 ? e : with_fraction) - pos;
    }
  }
  const size_t e = exponent(p);
  return e > 0 ? e - pos : 0;
}

size_t match_integer_literal(std::string_view src, size_t pos) {
  const auto lower = [&](size_t q) { return q < src.size() ? (src[q] | 0x20) : 0; };
  // (_?D)+ for the digit class of `base`.
  const auto radix_digits = [&](size_t q, int base) {
    size_t end = q;
    while (true) {
      size_t r = end;
      if (r < src.size() && src[r] == '_') ++r;
      const int c = lower(r);
      const bool ok = base == 2   ? (c == '0' || c == '1')
                      : base == 8 ? (c >= '0' && c <= '7')
                                  : (is_digit(static_cast<char>(c)) || (c >= 'a' && c <= 'f'));
      if (!ok) break;
      end = r + 1;
    }
    return end - q;
  };
  if (src[pos] == '0') {
    const int prefix = lower(pos + 1);
    const int base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : prefix == 'x' ? 16 : 0;
    if (base != 0) {
      const size_t n = radix_digits(pos + 2, base);
      if (n > 0) return n + 2;
    }
    size_t end = pos + 1;  // 0(_?0)*
    while (true) {
      size_t r = end;
      if (r < src.size() && src[r] == '_') ++r;
      if (r >= src.size() || src[r] != '0') break;
      end = r + 1;
    }
    return end - pos;
  }
  return is_digit(src[pos]) ? match_digits(src, pos) : 0;
}

bool parse_integer_literal(std::string_view text, int64_t* value) {
  std::string digits;
  for (const char c : text) {
    if (c != '_') digits += c;
  }
  int base = 10;
  if (digits.size() > 1 && digits[0] == '0' && !is_digit(digits[1])) {
    base = (digits[1] | 0x20) == 'b' ? 2 : (digits[1] | 0x20) == 'o' ? 8 : 16;
    digits = digits.substr(2);
  }
  errno = 0;
  const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
  if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) return false;
  *value = static_cast<int64_t>(v);
  return true;
}

double parse_float_literal(std::string_view text) {
  std::string digits;
  for (const char c : text) {
    if (c != '_') digits += c;
  }
  return std::strtod(digits.c_str(), nullptr);
}

StringLiteral scan_string_literal(std::string_view src, size_t pos) {
  StringLiteral lit;
  const char quote = src[pos];
  size_t p = pos + 1;
  const auto fail = [&](std::string message) {
    lit.error = std::move(message);
    return lit;
  };
  while (true) {
    if (p >= src.size()) return fail("unexpected end of string");
    const char c = src[p];
    if (c == quote) break;
    if (c == '\n') ++lit.newlines;
    if (c != '\\') {
      lit.value += c;
      ++p;
      continue;
    }
    if (p + 1 >= src.size()) return fail("unexpected end of string");
    const char e = src[p + 1];
    p += 2;
    switch (e) {
      case '\n':
        ++lit.newlines;
        break;  // line continuation
      case '\\':
        lit.value += '\\';
        break;
      case '\'':
        lit.value += '\'';
        break;
      case '"':
        lit.value += '"';
        break;
      case 'a':
        lit.value += '\a';
        break;
      case 'b':
        lit.value += '\b';
        break;
      case 'f':
        lit.value += '\f';
        break;
      case 'n':
        lit.value += '\n';
        break;
      case 'r':
        lit.value += '\r';
        break;
      case 't':
        lit.value += '\t';
        break;
      case 'v':
        lit.value += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        long cp = 0;
        for (int i = 0; i < digits; i += 4) {
          const int part = hex_value(src, p + i, std::min(4, digits - i));
          if (part < 0) return fail(fmt::format("truncated \\{} escape in string literal", e));
          cp = (cp << (4 * std::min(4, digits - i))) | part;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
          return fail("invalid or surrogate code point escape in string literal");
        }
        append_utf8(static_cast<char32_t>(cp), &lit.value);
        p += digits;
        break;
      }
      case 'N':
        return fail("\\N{...} escapes are not supported in string literals");
      default:
        if (e >= '0' && e <= '7') {  // up to three octal digits
          int cp = e - '0';
          for (int i = 0; i < 2 && p < src.size() && src[p] >= '0' && src[p] <= '7'; ++i) {
            cp = cp * 8 + (src[p++] - '0');
          }
          append_utf8(static_cast<char32_t>(cp), &lit.value);
        } else {
          lit.value += '\\';  // unknown escapes are kept, backslash included
          p -= 1;
        }
    }
  }
  lit.end = p + 1;
  return lit;
}

}  // namespace specd::chat
