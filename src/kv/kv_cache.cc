// KV cache allocation and length bookkeeping.
#include "kv/kv_cache.h"

#include "core/error.h"

namespace specd {

KvCache::KvCache(Backend& backend, const KvCacheShape& shape) : shape_(shape) {
  SPECD_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0 &&
                  shape.n_slots > 0 && shape.capacity > 0,
              "invalid KV cache shape");
  SPECD_CHECK(shape.dtype == DType::kF32 || shape.dtype == DType::kF16 || shape.dtype == DType::kBF16, "KV cache dtype must be f32, f16 or bf16");
  size_t per_layer = static_cast<size_t>(shape.n_slots) * shape.capacity * shape.n_kv_heads *
                     shape.head_dim * dtype_size(shape.dtype);
  for (int l = 0; l < shape.n_layers; ++l) {
    k_.push_back(backend.alloc(per_layer));
    v_.push_back(backend.alloc(per_layer));
  }
  lengths_.assign(shape.n_slots, 0);
}

KvLayerView KvCache::layer(int layer) const {
  KvLayerView view;
  view.k = k_.at(layer).data();
  view.v = v_.at(layer).data();
  view.dtype = shape_.dtype;
  view.capacity = shape_.capacity;
  view.n_slots = shape_.n_slots;
  view.slot_stride = static_cast<int64_t>(shape_.capacity) * shape_.n_kv_heads * shape_.head_dim;
  view.n_kv_heads = shape_.n_kv_heads;
  view.head_dim = shape_.head_dim;
  return view;
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l) total += k_[l].bytes() + v_[l].bytes();
  return total;
}

void KvCache::set_length(int slot, int length) {
  SPECD_CHECK(slot >= 0 && slot < shape_.n_slots, "KV cache slot {} out of range", slot);
  SPECD_CHECK(length >= 0 && length <= shape_.capacity,
              "context full: {} tokens do not fit the KV cache of {} entries", length,
              shape_.capacity);
  lengths_[slot] = length;
}

void KvCache::truncate(int slot, int length) {
  SPECD_CHECK(slot >= 0 && slot < shape_.n_slots, "KV cache slot {} out of range", slot);
  SPECD_CHECK(length >= 0 && length <= lengths_[slot], "cannot truncate slot {} from {} to {}",
              slot, lengths_[slot], length);
  lengths_[slot] = length;
}

}  // namespace specd
