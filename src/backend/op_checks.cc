// Argument validation shared by every backend and the references.
#include "backend/op_checks.h"

#include <utility>

#include "core/error.h"

namespace specd::op_checks {

namespace {

std::string shape(const Tensor& t) {
  return fmt::format("[{}, {}] {}", t.rows, t.cols, dtype_name(t.dtype));
}

void check_view(const char* op, const char* name, const Tensor& t) {
  SPECD_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, name);
  SPECD_CHECK(t.rows >= 0 && t.cols >= 0 && (t.rows <= 1 || t.stride >= t.cols),
              "{}: {} has a bad shape {} (stride {})", op, name, shape(t), t.stride);
}

// A weight [rows, cols] of a float or block-quantised dtype (whole blocks per row).
void check_weight(const char* op, const char* name, const Tensor& t) {
  check_view(op, name, t);
  SPECD_CHECK(is_weight_dtype(t.dtype), "{}: {} dtype {} is not a float or quantised type", op,
              name, dtype_name(t.dtype));
  const int64_t block = dtype_block_elems(t.dtype);
  SPECD_CHECK(t.cols % block == 0 && t.stride % block == 0,
              "{}: {} is {} with stride {}: rows must be whole blocks of {}", op, name, shape(t),
              t.stride, block);
}

void check_f32(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols) {
  check_view(op, name, t);
  SPECD_CHECK(t.dtype == DType::kF32 && t.rows == rows && t.cols == cols,
              "{}: {} is {}, expected [{}, {}] f32", op, name, shape(t), rows, cols);
}

void check_float_vector(const char* op, const char* name, const Tensor& t, int64_t n) {
  check_view(op, name, t);
  SPECD_CHECK(is_float_dtype(t.dtype) && t.rows == 1 && t.cols == n,
              "{}: {} is {}, expected [1, {}] f32/f16/bf16", op, name, shape(t), n);
}

void check_i32_vector(const char* op, const char* name, const Tensor& t, int64_t n) {
  check_view(op, name, t);
  SPECD_CHECK(t.dtype == DType::kI32 && t.rows == 1 && t.cols == n,
              "{}: {} is {}, expected [1, {}] i32", op, name, shape(t), n);
}

// Byte range [begin, end) a view covers.
std::pair<const char*, const char*> extent(const Tensor& t) {
  const char* begin = static_cast<const char*>(t.data);
  if (t.numel() == 0) return {begin, begin};
  size_t elems = static_cast<size_t>((t.rows - 1) * t.stride + t.cols);
  return {begin, begin + dtype_row_bytes(t.dtype, static_cast<int64_t>(elems))};
}

bool overlap(const Tensor& a, const Tensor& b) {
  auto [a0, a1] = extent(a);
  auto [b0, b1] = extent(b);
  return a0 < b1 && b0 < a1;
}

void check_cache(const char* op, const KvLayerView& cache) {
  SPECD_CHECK(cache.k != nullptr && cache.v != nullptr, "{}: the KV cache has no memory", op);
  SPECD_CHECK(is_float_dtype(cache.dtype), "{}: KV cache dtype {} is not f32/f16/bf16", op,
              dtype_name(cache.dtype));
  SPECD_CHECK(cache.n_kv_heads > 0 && cache.head_dim > 0 && cache.capacity > 0 && cache.n_slots > 0,
              "{}: bad KV cache view (kv heads {}, head dim {}, capacity {}, slots {})", op,
              cache.n_kv_heads, cache.head_dim, cache.capacity, cache.n_slots);
  SPECD_CHECK(cache.slot_stride >= cache.capacity * cache.n_kv_heads * cache.head_dim,
              "{}: KV cache slot stride {} is smaller than capacity * kv heads * head dim", op,
              cache.slot_stride);
}

// Checks rows.count, rows.slots and (for store_kv or causal attention) rows.cache_index.
void check_rows(const char* op, const KvLayerView& cache, const AttentionRows& rows, int64_t m,
                bool need_cache_index, bool read_indices) {
  SPECD_CHECK(rows.count == m, "{}: rows.count is {} but the input has {} rows", op, rows.count, m);
  check_i32_vector(op, "rows.slots", rows.slots, m);
  if (need_cache_index) check_i32_vector(op, "rows.cache_index", rows.cache_index, m);
  if (!read_indices) return;
  for (int64_t i = 0; i < m; ++i) {
    int32_t slot = i32_at(rows.slots, i);
    SPECD_CHECK(slot >= 0 && slot < cache.n_slots, "{}: row {} has slot {} outside [0, {})", op, i,
                slot, cache.n_slots);
  }
  if (!need_cache_index) return;
  for (int64_t i = 0; i < m; ++i) {
    int32_t index = i32_at(rows.cache_index, i);
    SPECD_CHECK(index >= 0 && index < cache.capacity,
                "{}: row {} has cache index {} outside the cache capacity [0, {})", op, i, index,
                cache.capacity);
  }
}

}  // namespace

void embedding(const Tensor& ids, const Tensor& table, const Tensor& out, bool read_indices) {
  check_i32_vector("embedding", "ids", ids, ids.cols);
  check_weight("embedding", "table", table);
  check_f32("embedding", "out", out, ids.cols, table.cols);
  if (!read_indices) return;
  for (int64_t m = 0; m < ids.cols; ++m) {
    int32_t id = i32_at(ids, m);
    SPECD_CHECK(id >= 0 && id < table.rows, "embedding: token id {} (row {}) is outside [0, {})",
                id, m, table.rows);
  }
}

void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  check_weight("matmul", "w", w);
  check_f32("matmul", "x", x, x.rows, w.cols);
  check_f32("matmul", "y", y, x.rows, w.rows);
  if (bias != nullptr) check_float_vector("matmul", "bias", *bias, w.rows);
  SPECD_CHECK(!overlap(x, y), "matmul: y overlaps x (the output must be a separate buffer)");
}

void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y) {
  check_f32("rms_norm", "x", x, x.rows, x.cols);
  check_f32("rms_norm", "y", y, x.rows, x.cols);
  check_float_vector("rms_norm", "weight", weight, x.cols);
}

void rope(const Tensor& x, int n_heads, const Tensor& positions, const RopeTable& table,
          bool read_indices) {
  check_f32("rope", "table.cos", table.cos, table.cos.rows, table.cos.cols);
  check_f32("rope", "table.sin", table.sin, table.cos.rows, table.cos.cols);
  int64_t head_dim = 2 * table.cos.cols;
  SPECD_CHECK(n_heads > 0 && head_dim > 0, "rope: bad n_heads {} or head dim {}", n_heads,
              head_dim);
  check_f32("rope", "x", x, x.rows, n_heads * head_dim);
  check_i32_vector("rope", "positions", positions, x.rows);
  if (!read_indices) return;
  for (int64_t m = 0; m < x.rows; ++m) {
    int32_t pos = i32_at(positions, m);
    SPECD_CHECK(pos >= 0 && pos < table.cos.rows,
                "rope: position {} (row {}) is outside the rope table [0, {})", pos, m,
                table.cos.rows);
  }
}

void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check_f32("silu_mul", "gate", gate, gate.rows, gate.cols);
  check_f32("silu_mul", "up", up, gate.rows, gate.cols);
  check_f32("silu_mul", "out", out, gate.rows, gate.cols);
}

void argmax_rows(const Tensor& logits, const Tensor& ids) {
  check_f32("argmax_rows", "logits", logits, logits.rows, logits.cols);
  SPECD_CHECK(logits.cols > 0, "argmax_rows: logits have no columns");
  check_i32_vector("argmax_rows", "ids", ids, logits.rows);
}

void gelu_tanh_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check_f32("gelu_tanh_mul", "gate", gate, gate.rows, gate.cols);
  check_f32("gelu_tanh_mul", "up", up, gate.rows, gate.cols);
  check_f32("gelu_tanh_mul", "out", out, gate.rows, gate.cols);
}

void scale(const Tensor& x) { check_f32("scale", "x", x, x.rows, x.cols); }

void add(const Tensor& x, const Tensor& y) {
  check_f32("add", "x", x, x.rows, x.cols);
  check_f32("add", "y", y, x.rows, x.cols);
  SPECD_CHECK(!overlap(x, y), "add: y overlaps x");
}

void store_kv(const Tensor& k, const Tensor& v, const KvLayerView& cache, const AttentionRows& rows,
              bool read_indices) {
  check_cache("store_kv", cache);
  int64_t width = static_cast<int64_t>(cache.n_kv_heads) * cache.head_dim;
  check_f32("store_kv", "k", k, k.rows, width);
  check_f32("store_kv", "v", v, k.rows, width);
  check_rows("store_kv", cache, rows, k.rows, true, read_indices);
}

void attention(const Tensor& q, int n_heads, const KvLayerView& cache, const AttentionRows& rows,
               const Tensor& out, bool read_indices) {
  check_cache("attention", cache);
  SPECD_CHECK(n_heads > 0 && n_heads % cache.n_kv_heads == 0,
              "attention: {} query heads is not a multiple of {} KV heads", n_heads,
              cache.n_kv_heads);
  int64_t width = static_cast<int64_t>(n_heads) * cache.head_dim;
  check_f32("attention", "q", q, q.rows, width);
  check_f32("attention", "out", out, q.rows, width);
  int64_t m = q.rows;
  bool masked = rows.mask_start.data != nullptr;
  check_rows("attention", cache, rows, m, !masked, read_indices);
  SPECD_CHECK(rows.window >= 0, "attention: negative window {}", rows.window);
  if (rows.window > 0) {
    check_i32_vector("attention", "rows.positions", rows.positions, m);
    for (int64_t i = 0; read_indices && !masked && i < m; ++i) {
      SPECD_CHECK(i32_at(rows.cache_index, i) > i32_at(rows.positions, i) - rows.window,
                  "attention: row {} (cache entry {}, position {}) is outside its own window {}", i,
                  i32_at(rows.cache_index, i), i32_at(rows.positions, i), rows.window);
    }
  }
  if (!masked) return;
  check_i32_vector("attention", "rows.mask_start", rows.mask_start, m);
  if (rows.mask.cols > 0) {
    check_view("attention", "rows.mask", rows.mask);
    SPECD_CHECK(rows.mask.dtype == DType::kI32 && rows.mask.rows == m,
                "attention: rows.mask is {}, expected [{}, n] i32", shape(rows.mask), m);
  }
  if (!read_indices) return;
  for (int64_t i = 0; i < m; ++i) {
    int64_t start = i32_at(rows.mask_start, i);
    SPECD_CHECK(start >= 0 && start <= cache.capacity,
                "attention: row {} has mask start {} outside [0, {}]", i, start, cache.capacity);
    int64_t last = start - 1;  // last visible entry
    for (int64_t j = 0; j < rows.mask.cols; ++j) {
      if (rows.mask.row<const int32_t>(i)[j] != 0) last = start + j;
    }
    SPECD_CHECK(last >= 0, "attention: row {} sees no cache entry", i);
    SPECD_CHECK(last < cache.capacity,
                "attention: row {} sees cache entry {} beyond the capacity {}", i, last,
                cache.capacity);
  }
}

}  // namespace specd::op_checks
