// The BPE model of tokenizer.json: vocabulary, ranked merges, byte fallback, unknown tokens,
// ignore_merges, and a per-thread cache of merged words.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/hash_tables.h"

namespace specd::tok {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;  // empty = none
  std::string end_of_word_suffix;         // empty = none
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

// Vocabulary and merges as read from tokenizer.json (merges already split into pairs), or
// merges already resolved to ids (left, right, merged; rank = position), which skips the
// lookups when the builder knows them (SentencePiece-style GGUF vocabularies).
struct BpeData {
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<std::array<int32_t, 3>> merge_ids;  // used instead of `merges` when not empty
  BpeOptions options;
};

class BpeModel {
 public:
  // Builds the tables; throws specd::Error when a merge names a token outside the vocabulary
  // or an id is negative or absurdly large.
  explicit BpeModel(BpeData data);
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Appends the ids of one pre-tokenized word. With `byte_level_input`, `word` holds raw bytes
  // and each byte stands for its GPT-2 byte-level character (the vocabulary's alphabet).
  void tokenize(std::string_view word, bool byte_level_input, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const { return vocab_.find(token); }
  // The vocabulary string of `id`, or nullptr if no token has that id.
  const std::string* id_to_token(int32_t id) const;
  // Number of vocabulary entries (tokenizers' get_vocab_size).
  size_t size() const { return vocab_.size(); }
  // One past the largest id of the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_entry_.size()); }

 private:
  // The merge loop of tokenizers' Word::merge_all on symbols already looked up.
  void merge(std::vector<int32_t>& symbols) const;
  // tokenize() for one word that is not cut further.
  void tokenize_piece(std::string_view word, bool byte_level_input,
                      std::vector<int32_t>& out) const;
  // tokenizers' BPE::merge_word: characters to initial symbols (prefix/suffix, byte fallback,
  // unknown-token fusion), then merges.
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void tokenize_uncached(std::string_view word, bool byte_level_input,
                         std::vector<int32_t>& out) const;
  // Whether merge_word() drops the character `ch` (no token, byte token or unknown token).
  bool is_dropped(std::string_view ch) const;

  StringTable vocab_;
  std::vector<int32_t> id_to_entry_;  // id -> vocab_ entry index, -1 if unused
  PairTable merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_level_ids_{};     // id of each byte's byte-level character
  bool byte_level_fast_ = false;                  // all 256 present and no prefix/suffix
  std::array<int32_t, 256> byte_fallback_ids_{};  // id of "<0xXX>", -1 if absent
  bool split_at_metaspace_ = false;        // long words may be cut before "▁" (see constructor)
  std::vector<char32_t> joins_metaspace_;  // characters that precede "▁" inside some token
  bool may_drop_chars_ = false;            // no unknown token and not all 256 byte tokens
  uint32_t cache_owner_ = 0;  // key of this model's entries in the per-thread word cache
};

}  // namespace specd::tok
