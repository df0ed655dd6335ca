// Position-indexed KV cache for several sequences (slots); rollback is truncate(len).
#pragma once

#include <vector>

#include "backend/backend.h"

namespace specd {

struct KvCacheShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_slots = 1;
  int capacity = 0;  // entries per slot (the context size)
  DType dtype = DType::kBF16;
};

// Memory is allocated once at construction: per layer, K and V of [slots, capacity, kv_heads,
// head_dim]. The cache only tracks each slot's committed length; rejected entries are simply
// overwritten by later writes (invariant: length == committed tokens after each step).
class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  KvLayerView layer(int layer) const;
  size_t bytes() const;

  int length(int slot) const { return lengths_.at(slot); }
  // Records that `length` entries of `slot` are committed. Throws past capacity.
  void set_length(int slot, int length);
  // Rollback: keeps the first `length` entries (length <= current length).
  void truncate(int slot, int length);

 private:
  KvCacheShape shape_;
  std::vector<DeviceBuffer> k_;  // per layer
  std::vector<DeviceBuffer> v_;  // per layer
  std::vector<int> lengths_;     // per slot
};

}  // namespace specd
