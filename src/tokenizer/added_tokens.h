// Added tokens (tokenizer.json "added_tokens"): matched in the input before the model runs,
// with tokenizers' leftmost-longest rule and its lstrip/rstrip/single_word/normalized flags.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_file.h"
#include "tokenizer/hash_tables.h"

namespace specd::tok {

class BpeModel;
class Normalizer;

struct AddedToken {
  std::string content;
  std::string decode_text;  // what decode() emits: the normalized content for normalized tokens
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A byte trie over token strings with a leftmost-longest search.
class TokenTrie {
 public:
  void insert(std::string_view pattern, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // The value of the longest pattern starting at `pos` (and its end), or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t& end) const;
  bool may_start(unsigned char byte) const { return first_byte_[byte]; }
  // Position of the first byte at or after `pos` that may start a pattern (or text.size()).
  size_t next_candidate(std::string_view text, size_t pos) const;

 private:
  struct Node {
    int32_t value = -1;
    std::vector<std::pair<uint8_t, uint32_t>> children;  // sorted by byte
  };
  uint32_t child(uint32_t node, uint8_t byte) const;
  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> first_byte_{};
  int single_first_byte_ = -1;  // >= 0 when all patterns start with this byte
  int first_byte_count_ = 0;
};

class AddedVocabulary {
 public:
  // A run of text (id == -1) or a matched added token, as [begin, end) of the searched text.
  struct Segment {
    int32_t id;
    size_t begin;
    size_t end;
  };

  // Registers tokenizer.json's "added_tokens" the way tokenizers does: an existing id for the
  // content (added or model vocabulary) wins over the declared one, new contents get ids from
  // the model's vocabulary size upwards.
  void build(const Json& added_tokens, const BpeModel& model, const Normalizer* normalizer);

  bool has_raw_tokens() const { return !raw_trie_.empty(); }
  bool has_normalized_tokens() const { return !normalized_trie_.empty(); }
  // Splits `text` around matches of the non-normalized (`normalized` false, searched in the
  // raw input) or normalized tokens (searched in normalized text). Appends to `out`.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  // tokenizers skips tokens by content: any token whose text is a special added token's.
  bool is_special_content(std::string_view content) const;
  int32_t id_limit() const { return static_cast<int32_t>(id_to_index_.size()); }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<int32_t> id_to_index_;  // id -> index into tokens_, -1 if none
  StringTable content_to_id_;
  StringTable special_contents_;
  TokenTrie raw_trie_;         // values are ids
  TokenTrie normalized_trie_;  // values are ids
};

}  // namespace specd::tok
