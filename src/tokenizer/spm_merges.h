// BPE merges recovered from a SentencePiece-style vocabulary (tokens and scores, no merges), as
// transformers' generate_merges() does for GGUF files.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace specd::tok {

// transformers' generate_merges(vocab, vocab_scores): every token that splits into two
// vocabulary tokens gives a merge, sorted best-first by (key, code points of the left part,
// code points of the right part), ties kept in vocabulary order. `tokens` are the vocabulary
// in id order (later duplicates win, as in a Python dict) and `keys[i]` the sort key of token
// i (its score, or minus its position). Tokens must be valid UTF-8. Linear in the total length
// of the tokens plus a sort of the merges.
std::vector<std::pair<std::string, std::string>> merges_from_scores(
    const std::vector<std::string>& tokens, const std::vector<double>& keys);

}  // namespace specd::tok
