// Hash-chained prompt blocks with LRU eviction (see prefix_cache.h).
#include "engine/prefix_cache.h"

#include "core/dtype.h"
#include "core/error.h"

namespace specd {

PrefixCache::PrefixCache(Backend& backend, KvCache& kv, int block_tokens, size_t budget_bytes)
    : backend_(backend), kv_(kv), block_tokens_(block_tokens), budget_bytes_(budget_bytes) {
  SPECD_CHECK(block_tokens > 0, "prefix cache blocks must hold at least one token");
  const KvCacheShape& s = kv.shape();
  entry_bytes_ = static_cast<size_t>(s.n_layers) * 2 * block_tokens * s.n_kv_heads * s.head_dim *
                 dtype_size(s.dtype);
}

uint64_t PrefixCache::key(uint64_t parent, std::span<const int32_t> block) const {
  // FNV-1a over the parent key and the block's tokens.
  uint64_t h = 1469598103934665603ull ^ parent;
  h *= 1099511628211ull;
  for (int32_t token : block) {
    for (int b = 0; b < 4; ++b) {
      h ^= static_cast<uint8_t>(static_cast<uint32_t>(token) >> (8 * b));
      h *= 1099511628211ull;
    }
  }
  return h == 0 ? 1 : h;
}

void PrefixCache::copy(int slot, int first_token, Entry& entry, bool to_cache) {
  const KvCacheShape& s = kv_.shape();
  const size_t row = static_cast<size_t>(s.n_kv_heads) * s.head_dim * dtype_size(s.dtype);
  const size_t block = row * block_tokens_;
  uint8_t* host = entry.data.data();
  for (int l = 0; l < s.n_layers; ++l) {
    KvLayerView view = kv_.layer(l);
    const size_t offset = (static_cast<size_t>(slot) * view.slot_stride * dtype_size(s.dtype)) +
                          static_cast<size_t>(first_token) * row;
    for (void* base : {view.k, view.v}) {
      uint8_t* device = static_cast<uint8_t*>(base) + offset;
      if (to_cache) {
        backend_.copy_to_host(host, device, block);
      } else {
        backend_.copy_to_device(device, host, block);
      }
      host += block;
    }
  }
}

int PrefixCache::restore(int slot, std::span<const int32_t> prompt, int max_blocks) {
  uint64_t parent = 0;
  int restored = 0;
  for (int b = 0; b < max_blocks; ++b) {
    std::span<const int32_t> block =
        prompt.subspan(static_cast<size_t>(b) * block_tokens_, block_tokens_);
    const uint64_t k = key(parent, block);
    auto it = entries_.find(k);
    if (it == entries_.end() || it->second.parent != parent ||
        !std::equal(block.begin(), block.end(), it->second.tokens.begin())) {
      break;
    }
    copy(slot, b * block_tokens_, it->second, false);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    restored += block_tokens_;
    parent = k;
  }
  hit_tokens_ += restored;
  return restored;
}

void PrefixCache::store(int slot, std::span<const int32_t> prompt, int index) {
  if (entry_bytes_ > budget_bytes_) return;
  uint64_t parent = 0;
  for (int b = 0; b < index; ++b) {
    parent = key(parent, prompt.subspan(static_cast<size_t>(b) * block_tokens_, block_tokens_));
  }
  std::span<const int32_t> block =
      prompt.subspan(static_cast<size_t>(index) * block_tokens_, block_tokens_);
  const uint64_t k = key(parent, block);
  if (entries_.count(k)) return;
  while (bytes_ + entry_bytes_ > budget_bytes_ && !lru_.empty()) {
    entries_.erase(lru_.back());
    lru_.pop_back();
    bytes_ -= entry_bytes_;
  }
  Entry& entry = entries_[k];
  entry.parent = parent;
  entry.tokens.assign(block.begin(), block.end());
  entry.data.resize(entry_bytes_);
  copy(slot, index * block_tokens_, entry, true);
  lru_.push_front(k);
  entry.lru = lru_.begin();
  bytes_ += entry_bytes_;
}

}  // namespace specd
