// Internal state shared by Tokenizer and StreamingDetokenizer (not part of the public API).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/json_file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizers.h"

namespace specd::tok {

struct TokenizerImpl {
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  bool byte_level_input = false;  // pieces reach the model as raw bytes (see PreTokenizerBuild)
  PostProcessor post_processor;
  Decoder decoder;
  Json config = Json::object();
  std::string chat_template;
  std::optional<int32_t> bos_id, eos_id;
  int32_t vocab_size = 0;

  // Appends the ids of one text segment that holds no raw added token.
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
  // The string that decoding emits for `id`, or nullptr for an unknown id.
  const std::string* decode_text(int32_t id) const;
  bool skip_in_decode(int32_t id, const std::string& text, bool skip_special) const;
};

// Builds the implementation from a parsed tokenizer.json and tokenizer_config.json.
std::shared_ptr<const TokenizerImpl> build_tokenizer(struct TokenizerJson parsed, Json config,
                                                     std::string chat_template_file);

}  // namespace specd::tok
