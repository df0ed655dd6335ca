// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): Split, ByteLevel, Metaspace, Digits,
// Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, CharDelimiterSplit, Sequence.
#pragma once

#include <memory>

#include "io/json_file.h"
#include "tokenizer/pieces.h"

namespace specd::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits and rewrites the pieces of `list` in place.
  virtual void pre_tokenize(PieceList& list) const = 0;
};

struct PreTokenizerBuild {
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null when tokenizer.json has none
  // True when the pipeline ends with ByteLevel's byte-to-character mapping and that mapping
  // was left to the model: the pieces then hold raw bytes and the BPE model maps them itself.
  bool byte_level_deferred = false;
};

// Builds the pre-tokenizer described by `json`. With `allow_deferred_byte_level`, a trailing
// ByteLevel step leaves its mapping to the model (see PreTokenizerBuild). Unsupported types
// (UnicodeScripts, FixedLength) throw specd::Error naming the type.
PreTokenizerBuild make_pre_tokenizer(const Json& json, bool allow_deferred_byte_level);

}  // namespace specd::tok
