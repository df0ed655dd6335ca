// The attention inputs of a layer in one launch (Backend::qkv_rope_store_kv): for up to 16 rows on
// the tensor-core matmuls, the q/k/v tiles pair each head's rotated columns, and the tile
// epilogue applies RoPE to q and k and writes k and v into the cache, which saves the
// rope_store_kv kernel between the q/k/v matmul and attention.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specd {

bool CudaBackend::qkv_rope_store_kv(FoldedNorm& norm, std::span<const MatmulPart> qkv, int n_heads,
                                    const RopeTable& table, const KvLayerView& cache,
                                    const AttentionRows& rows) {
  const Tensor& x = *norm.scaled;
  const int64_t half = table.cos.cols;
  // Whole 16-column tiles of 8 + 8 paired columns per head (head sizes a power of two), and the
  // full rotary width.
  if (!fuse_rope_ || qkv.size() != 3 || x.rows == 0 || x.rows > kSmallBatch ||
      2 * half != cache.head_dim || half < 8 || (half & (half - 1)) != 0) {
    return false;
  }
  cuda::MatmulGroup group = make_group(x, qkv, false);
  if (!small_tensor_core_group(group)) return false;

  Tensor &q = *qkv[0].y, &k = *qkv[1].y, &v = *qkv[2].y;
  check_device("qkv_rope_store_kv", index_,
               {&rows.positions, &rows.slots, &rows.cache_index, &table.cos, &table.sin});
  op_checks::rope(q, n_heads, rows.positions, table, /*read_indices=*/false);
  op_checks::rope(k, cache.n_kv_heads, rows.positions, table, /*read_indices=*/false);
  op_checks::store_kv(k, v, cache, rows, /*read_indices=*/false);
  if (norm.folded) {
    check_folded("qkv_rope_store_kv", x.rows, x.cols, norm);
    for (int p = 0; p < group.count; ++p) group.part[p].norm_in = norm_in(norm);
  }

  cuda::QkvOut out;
  out.half = static_cast<int>(half);
  out.positions = rows.positions.ptr<const int32_t>();
  out.cos = table.cos.ptr<const float>();
  out.sin = table.sin.ptr<const float>();
  out.table_stride = table.cos.stride;
  out.table_rows = table.cos.rows;
  out.cache_dtype = cache.dtype;
  out.capacity = cache.capacity;
  out.n_slots = cache.n_slots;
  out.slot_stride = cache.slot_stride;
  out.slots = rows.slots.ptr<const int32_t>();
  out.cache_index = rows.cache_index.ptr<const int32_t>();
  group.part[0].qkv = out;  // q: rotated into y
  group.part[1].qkv = out;  // k: rotated into the cache
  group.part[1].qkv.cache = cache.k;
  group.part[2].qkv = out;  // v: into the cache as it is
  group.part[2].qkv.half = 0;
  group.part[2].qkv.cache = cache.v;
  run_small(group);
  return true;
}

}  // namespace specd
