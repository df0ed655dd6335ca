// Reads tokenizer.json quickly: a SAX pass that streams model.vocab and model.merges straight
// into BpeData and builds an ordinary JSON tree for everything else.
#pragma once

#include <string>
#include <string_view>

#include "io/json_file.h"
#include "tokenizer/bpe_model.h"

namespace specd::tok {

struct TokenizerJson {
  Json doc;  // the whole file, with model.vocab / model.merges left empty when captured
  BpeData bpe;
  bool vocab_captured = false;
  bool merges_captured = false;
};

// Parses tokenizer.json text; `what` names the source in errors.
TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& what);

// Takes vocab and merges out of an already parsed document.
TokenizerJson tokenizer_json_from_tree(Json doc);

// Appends the merges of a JSON array in either form ("a b" strings or ["a", "b"] pairs).
void read_merges(const Json& merges, std::vector<std::pair<std::string, std::string>>& out);
// Splits one legacy merge line "a b"; returns false for "#version" lines.
bool split_merge_line(const std::string& line, size_t index,
                      std::vector<std::pair<std::string, std::string>>& out);

}  // namespace specd::tok
