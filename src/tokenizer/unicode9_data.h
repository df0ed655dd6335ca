// Range tables that pin normalization to Unicode 9.0, the version Hugging Face tokenizers uses.
#pragma once

#include <cstddef>

namespace specd::tok {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

extern const CodePointRange kNewerNormalizationChars[];
extern const size_t kNewerNormalizationChars_count;
extern const CodePointRange kUnicode9Marks[];
extern const size_t kUnicode9Marks_count;

}  // namespace specd::tok
