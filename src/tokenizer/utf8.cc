// UTF-8 validation and lossy repair following the maximal-subpart rule.
#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

// Result of examining one sequence at the start of `s`: `length` bytes that form either a valid
// character (`valid`) or a maximal invalid subpart; `incomplete` when the input ended inside a
// sequence that could still be completed.
struct SequenceScan {
  size_t length;
  bool valid;
  bool incomplete;
};

SequenceScan scan_sequence(std::string_view s) {
  auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return {1, true, false};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 == 0xE0) {
    need = 3;
    lo = 0xA0;
  } else if (b0 >= 0xE1 && b0 <= 0xEC) {
    need = 3;
  } else if (b0 == 0xED) {
    need = 3;
    hi = 0x9F;
  } else if (b0 >= 0xEE && b0 <= 0xEF) {
    need = 3;
  } else if (b0 == 0xF0) {
    need = 4;
    lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 4;
  } else if (b0 == 0xF4) {
    need = 4;
    hi = 0x8F;
  } else {
    return {1, false, false};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {i, false, true};
    auto b = static_cast<unsigned char>(s[i]);
    unsigned char min = i == 1 ? lo : 0x80;
    unsigned char max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {i, false, false};
  }
  return {need, true, false};
}

}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t valid_utf8_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    // Fast path over ASCII, eight bytes at a time.
    while (pos + 8 <= s.size()) {
      uint64_t word = 0;
      for (int i = 0; i < 8; ++i)
        word |= uint64_t(static_cast<unsigned char>(s[pos + i])) << (8 * i);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= s.size()) break;
    SequenceScan scan = scan_sequence(s.substr(pos));
    if (!scan.valid) return pos;
    pos += scan.length;
  }
  return s.size();
}

size_t append_utf8_lossy(std::string& out, std::string_view s, bool final) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t valid_end = pos + valid_utf8_prefix(s.substr(pos));
    out.append(s.data() + pos, valid_end - pos);
    pos = valid_end;
    if (pos >= s.size()) break;
    SequenceScan scan = scan_sequence(s.substr(pos));
    if (scan.incomplete && !final) return pos;
    out.append(kReplacementUtf8);
    pos += scan.length;
  }
  return pos;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  append_utf8_lossy(out, s, true);
  return out;
}

}  // namespace specd::tok
