// Benchmark prompts: a JSON-lines file ({"prompt": text} or {"prompt_ids": [...]}) or random ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specd::cli {

// Reads up to `limit` prompts (0 = all). Text prompts need `tokenizer`. Throws specd::Error
// naming the line on malformed input.
std::vector<std::vector<int32_t>> read_prompt_file(const std::string& path,
                                                   const Tokenizer* tokenizer, int limit);

// `count` prompts of `length` ids drawn uniformly from [0, vocab) with `seed`.
std::vector<std::vector<int32_t>> random_prompts(int count, int length, int vocab, uint64_t seed);

}  // namespace specd::cli
