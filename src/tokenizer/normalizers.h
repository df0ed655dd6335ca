// Normalizers of tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD, Lowercase, Strip,
// StripAccents, Prepend, Replace, ByteLevel and Sequence.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "io/json_file.h"

namespace specd::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites `text` (valid UTF-8) in place.
  virtual void normalize(std::string& text) const = 0;
  // False when normalize() would certainly leave `text` unchanged (a cheap pre-check).
  virtual bool may_change(std::string_view text) const { return !text.empty(); }
};

// Builds the normalizer described by `json`; null JSON gives nullptr. Unsupported types
// (Precompiled, BertNormalizer, Nmt) throw specd::Error naming the type.
std::unique_ptr<Normalizer> make_normalizer(const Json& json);

}  // namespace specd::tok
