// Prompt KV reuse: whole prefill chunks of earlier prompts, keyed by a hash chain over their
// tokens, kept in host memory under an LRU byte budget.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache.h"

namespace specd {

// Blocks are exactly the prefill chunks (`block_tokens` = the model's max rows per forward): a
// chunk's K/V depend only on its tokens and the chunks before it, so a restored block holds
// the very bytes the prefill would write, and results with a hit equal those without.
class PrefixCache {
 public:
  PrefixCache(Backend& backend, KvCache& kv, int block_tokens, size_t budget_bytes);

  // Copies the longest run of cached blocks at the start of `prompt` (at most `max_blocks`)
  // into `slot`; returns the number of tokens restored (a multiple of block_tokens).
  int restore(int slot, std::span<const int32_t> prompt, int max_blocks);
  // Saves block `index` of `prompt` from `slot` (its K/V must be written) unless present.
  void store(int slot, std::span<const int32_t> prompt, int index);

  int block_tokens() const { return block_tokens_; }
  size_t bytes() const { return bytes_; }
  int64_t hit_tokens() const { return hit_tokens_; }

 private:
  struct Entry {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;  // [block_tokens]
    std::vector<uint8_t> data;    // per layer: K rows then V rows
    std::list<uint64_t>::iterator lru;
  };
  uint64_t key(uint64_t parent, std::span<const int32_t> block) const;
  void copy(int slot, int first_token, Entry& entry, bool to_cache);

  Backend& backend_;
  KvCache& kv_;
  int block_tokens_;
  size_t budget_bytes_;
  size_t entry_bytes_;
  size_t bytes_ = 0;
  int64_t hit_tokens_ = 0;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // most recently used first
};

}  // namespace specd
