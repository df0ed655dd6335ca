// Character classes and normalization; utf8proc stays private to this file.
#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "tokenizer/unicode9_data.h"
#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

bool in_ranges(const CodePointRange* ranges, size_t count, char32_t c) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (ranges[mid].last < c) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < count && ranges[lo].first <= c;
}

// utf8proc normalization of one run of text without Unicode-9-unknown characters.
std::string utf8proc_normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                         static_cast<utf8proc_ssize_t>(text.size()), &result,
                                         static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  SPECD_CHECK(length >= 0, "unicode normalization failed: {}", utf8proc_errmsg(length));
  return std::string(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
}

}  // namespace

bool is_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  }
  utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool is_mark(char32_t c) {
  if (c < 0x300) return false;
  return in_ranges(kUnicode9Marks, kUnicode9Marks_count, c);
}

std::string normalize_unicode(std::string_view text, NormalForm form) {
  // Text below U+0300 is already NFC; ASCII is invariant under every form.
  bool ascii = true, below_combining = true;
  for (size_t pos = 0; pos < text.size();) {
    char32_t c = next_code_point(text, pos);
    ascii &= c < 0x80;
    below_combining &= c < 0x300;
    if (!below_combining) break;
  }
  if (ascii || (below_combining && form == NormalForm::kNfc)) return std::string(text);
  // Characters newer than Unicode 9.0 are left alone, as tokenizers' tables do; since they
  // then act as starters that compose with nothing, the runs between them normalize apart.
  std::string out;
  size_t run_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t start = pos;
    char32_t c = next_code_point(text, pos);
    if (c >= 0x7FD && in_ranges(kNewerNormalizationChars, kNewerNormalizationChars_count, c)) {
      if (start > run_start)
        out += utf8proc_normalize(text.substr(run_start, start - run_start), form);
      out.append(text.substr(start, pos - start));
      run_start = pos;
    }
  }
  if (run_start == 0) return utf8proc_normalize(text, form);
  if (run_start < text.size()) out += utf8proc_normalize(text.substr(run_start), form);
  return out;
}

void append_lowercase(std::string& out, std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    char32_t c = next_code_point(text, pos);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    } else if (c == 0x130) {  // the one unconditional multi-character lowercase mapping
      out.append("i\xCC\x87");
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
}

}  // namespace specd::tok
