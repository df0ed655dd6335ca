// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing, BertProcessing,
// RobertaProcessing, ByteLevel (ids unchanged) and Sequence, for single sequences.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "io/json_file.h"

namespace specd::tok {

class PostProcessor {
 public:
  // No special tokens.
  PostProcessor() = default;
  // Builds from tokenizer.json's "post_processor" (null gives the identity).
  static PostProcessor from_json(const Json& json);
  // `bos` before and `eos` after the sequence (transformers' add_bos_token/add_eos_token).
  static PostProcessor bos_eos(std::optional<int32_t> bos, std::optional<int32_t> eos);

  // Adds the special tokens of a single sequence around `ids`.
  void apply(std::vector<int32_t>& ids) const;
  bool adds_tokens() const;

 private:
  // One template: pieces of special ids with the sequence at the `kSequence` marker.
  struct Template {
    std::vector<std::vector<int32_t>> parts;  // special ids, or empty with is_sequence set
    std::vector<bool> is_sequence;
  };
  static Template parse_template(const Json& json);
  static Template simple(std::vector<int32_t> before, std::vector<int32_t> after);
  std::vector<Template> templates_;  // applied in order (Sequence processors)
};

}  // namespace specd::tok
