// Argument validation shared by every backend and the references: shapes, dtypes, index ranges.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace specd::op_checks {

// Each function throws specd::Error naming the op and the offending argument. With
// read_indices == false (index tensors in device memory) only shapes are checked; the caller
// validated the index values on the host, and the kernels skip out-of-range rows.
void embedding(const Tensor& ids, const Tensor& table, const Tensor& out, bool read_indices = true);
void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y);
void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y);
// Also checks that every position is inside the table.
void rope(const Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table,
          bool read_indices = true);
void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void argmax_rows(const Tensor& logits, const Tensor& ids);
void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out);
void scale(const Tensor& x);
void add(const Tensor& x, const Tensor& y);
// Checks shapes and that every row's (slot, cache_index) is inside the cache.
void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache, const AttentionRows& rows,
              bool read_indices = true);
// Checks shapes, that every entry a row can see is inside its slot and (window > 0) that
// rows.positions is given and every causal row still sees its own entry.
void attention(const Tensor& q, int n_heads, const KvLayerView& cache, const AttentionRows& rows,
               const Tensor& out, bool read_indices = true);

// True for the element types weights, biases and norms may have (f32, f16, bf16).
inline bool is_float_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

// True for the element types of matmul weights and embedding tables: the float types and the
// block-quantised formats.
inline bool is_weight_dtype(DType dtype) { return is_float_dtype(dtype) || is_quantized(dtype); }

// Element i of a [1, n] i32 vector.
inline int32_t i32_at(const Tensor& vec, int64_t i) { return vec.ptr<const int32_t>()[i]; }

}  // namespace specd::op_checks
