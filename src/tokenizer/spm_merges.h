// BPE merges recovered from a SentencePiece-style vocabulary (tokens and scores, no merges), as
// transformers' generate_merges() does for GGUF files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/hash_tables.h"

namespace specd::tok {

// Python's {token: id} over `tokens` in id order: a repeated token keeps its last id.
StringTable last_ids(const std::vector<std::string>& tokens);

// One merge as ids (the last id of each token string).
struct MergeIds {
  int32_t left, right, merged;
};

// transformers' generate_merges(vocab, vocab_scores): every token that splits into two
// vocabulary tokens gives a merge, sorted best-first by (key, code points of the left part,
// code points of the right part), ties kept in vocabulary order. `tokens` are the vocabulary
// in id order, `ids` = last_ids(tokens), and `keys[i]` the sort key of token i (its score, or
// minus its position). Tokens must be valid UTF-8. Linear in the total length of the tokens
// (lookups batched to overlap cache misses) plus a sort of the merges.
std::vector<MergeIds> merges_from_scores(const std::vector<std::string>& tokens,
                                         const std::vector<double>& keys, const StringTable& ids);

// The same as token strings, building `ids` itself.
std::vector<std::pair<std::string, std::string>> merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<double>& keys);

}  // namespace specd::tok
