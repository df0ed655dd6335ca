// Private declarations of the CPU kernels (Highway, dynamically dispatched) used by CpuBackend.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace specd::cpu {

// y[:, n] = x · w[n]ᵀ (+ bias[n]) (+ y[:, n] if accumulate), for columns [n_begin, n_end).
struct MatmulArgs {
  const float* x = nullptr;  // [m, k] f32, row stride x_stride
  int64_t x_stride = 0;
  const void* w = nullptr;  // [n, k] f32/f16/bf16/quantised, row stride w_stride (elements)
  DType w_dtype = DType::kF32;
  int64_t w_stride = 0;
  const void* bias = nullptr;  // [1, n] f32/f16/bf16 or nullptr
  DType bias_dtype = DType::kF32;
  float* y = nullptr;  // [m, n] f32, row stride y_stride
  int64_t y_stride = 0;
  int64_t m = 0, n = 0, k = 0;
  bool accumulate = false;
  // bf16 weights on the small-M path: x rearranged by split_x, [m, k] f32, row stride
  // split_x_stride(k).
  const float* x_split = nullptr;
  // bf16 weights on the AVX512-BF16 path: x packed by pack_x_bf16, [m, bf16_x_stride(k)] bf16,
  // 64-byte aligned.
  const uint16_t* x_bf16 = nullptr;
};

// The batch-invariant small-M kernel: every (row, column) result is reduced in an order that
// depends only on k (and the SIMD target), never on m or on [n_begin, n_end).
// bf16 weights need args.x_split (and multiply its values, not args.x's).
void matmul_small(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

// args.x rearranged for the bf16 small-M kernel into out ([m, split_x_stride(k)] floats): per
// chunk of 2L elements (L = f32 lanes of the SIMD target), its even-index elements, then its
// odd-index ones, then the k % 2L tail in place; `round_bf16`: each value rounded to bf16.
void split_x(const MatmulArgs& args, bool round_bf16, float* out);
// Row stride of split_x's output: k rounded up to 16 floats, so that rows start on 64-byte lines.
inline int64_t split_x_stride(int64_t k) { return (k + 15) / 16 * 16; }

// The bf16 product (any number of rows) on CPUs with AVX512-BF16 dot products
// (matmul_bf16_dot.cc), on x rounded to bf16.
bool have_bf16_dot();  // the CPU has them (and the OS saves the 512-bit registers)
// Row stride of pack_x_bf16's output in bf16 elements: k rounded up to 32 (64 bytes).
inline int64_t bf16_x_stride(int64_t k) { return (k + 31) / 32 * 32; }
// args.x rounded to bf16 (ties to even) into out ([m, bf16_x_stride(k)], 64-byte aligned; the
// padding zeroed).
void pack_x_bf16(const MatmulArgs& args, uint16_t* out);
// The same contract as matmul_small for bf16 weights, on args.x_bf16; only if have_bf16_dot().
void matmul_bf16_dot(const MatmulArgs& args, int64_t n_begin, int64_t n_end);

// x quantised for the block-quantised kernel, per row and 32-element group: x ~= scale * q with
// q int16 (|q| <= 32767, rounded to nearest), and the exact f32 sum of the group. A group with a
// non-finite element gets a NaN scale, so the products it enters come out NaN. Group-major, so
// that the rows the kernel takes together sit side by side.
struct QuantizedX {
  const float* sum = nullptr;    // [k / 32, m] f32
  const float* scale = nullptr;  // [k / 32, m] f32
  const int16_t* q = nullptr;    // [k / 32, m, 32] int16
  int64_t groups = 0;            // k / 32
  int64_t rows = 0;              // m
};

// Quantises args.x into `scratch` (matmul_quant_scratch(args) floats).
QuantizedX quantize_x(const MatmulArgs& args, float* scratch);
int64_t matmul_quant_scratch(const MatmulArgs& args);

// The same contract as matmul_small for block-quantised weights (w_stride in elements, a whole
// number of blocks; k a whole number of blocks), on x as quantize_x gave it.
void matmul_quant(const MatmulArgs& args, const QuantizedX& x, int64_t n_begin, int64_t n_end);

// Sets OpenBLAS to one thread (once per process): the pool parallelises over column blocks.
// True if the build has the OpenBLAS prefill path.
bool have_gemm();
void gemm_init();

// Weight rows per block of the large-M path for a given k (a multiple of 16, about 1 MiB of f32
// per block); the caller's scratch holds gemm_block_rows(k) * k floats per thread.
int64_t gemm_block_rows(int64_t k);

// The large-M (prefill) path for columns [n_begin, n_end): widens gemm_block_rows(k) weight rows
// at a time into `scratch` and calls single-threaded cblas_sgemm on them (f32 weights are used
// in place, in one call). Not batch-invariant (OpenBLAS picks its own blocking); accurate to f32
// GEMM rounding.
void matmul_gemm(const MatmulArgs& args, int64_t n_begin, int64_t n_end, float* scratch);

// dst[r][c] = src[r][c] widened to f32 for r < rows, c < cols. src: f32/f16/bf16, or a
// block-quantised dtype (dequantised; src_stride and cols whole blocks).
void widen_rows(const void* src, DType dtype, int64_t src_stride, int64_t rows, int64_t cols,
                float* dst, int64_t dst_stride);

// f32 -> dtype (bf16 and f16 round to nearest even), n elements.
void narrow_row(const float* src, int64_t n, DType dtype, void* dst);

// y[r] = (x[r] * (1 / sqrt(mean(x[r]²) + eps))) * w for rows [0, rows). x, y: f32; w: [cols].
void rms_norm_rows(const float* x, int64_t x_stride, const void* w, DType w_dtype, float eps,
                   float* y, int64_t y_stride, int64_t rows, int64_t cols);

// In-place rotate-half rotary embedding of rows [0, rows) of x ([rows, n_heads * 2 * half]).
// cos/sin: [*, half] f32 tables with row stride table_stride, indexed by positions[r].
void rope_rows(float* x, int64_t x_stride, int64_t rows, int n_heads, int64_t half,
               const int32_t* positions, const float* cos, const float* sin, int64_t table_stride);

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up, n elements.
void silu_mul_row(const float* gate, const float* up, float* out, int64_t n);

// out = gelu_tanh(gate) * up (PyTorch's tanh approximation of GELU), n elements.
void gelu_tanh_mul_row(const float* gate, const float* up, float* out, int64_t n);

// The first index of the largest element of x[0..n) (n >= 1), ignoring NaNs; 0 if x[0] is NaN.
int64_t argmax_row(const float* x, int64_t n);

// x *= s, n elements.
void scale_row(float* x, int64_t n, float s);

// y += x, n elements.
void add_row(const float* x, float* y, int64_t n);

// One attention problem: everything the attention work items need.
struct AttentionArgs {
  const float* q = nullptr;  // [m, n_heads * head_dim] f32
  int64_t q_stride = 0;
  float* out = nullptr;  // like q (may alias q)
  int64_t out_stride = 0;
  const void* k = nullptr;  // cache k[slot][index][kv_head][head_dim]
  const void* v = nullptr;
  DType cache_dtype = DType::kBF16;
  int64_t slot_stride = 0;
  int64_t capacity = 0;  // entries per slot
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t m = 0;
  float scale = 1.0f;
  const int32_t* slots = nullptr;        // [m]
  const int32_t* cache_index = nullptr;  // [m] (causal rows)
  const int32_t* positions = nullptr;    // [m] (window > 0)
  int64_t window = 0;                    // > 0: hide entries j <= positions[m] - window
  const int32_t* mask_start = nullptr;   // [m] or nullptr (causal)
  const int32_t* mask = nullptr;         // [m, mask_cols] with row stride mask_stride
  int64_t mask_cols = 0, mask_stride = 0;
  // Row blocks: rows [row_blocks[b], row_blocks[b + 1]) share one slot, at most
  // kMaxRowsPerItem of them.
  const int32_t* row_blocks = nullptr;  // [n_row_blocks + 1]
  int64_t n_row_blocks = 0;
  // Query heads per work item: a divisor of n_heads / n_kv_heads, or a multiple of it (the item
  // then reads several adjacent KV heads). The rows and heads of one item share each load (and
  // widening) of the keys and values they read. Rows of a block times heads_per_item is at most
  // kMaxQueriesPerItem.
  int heads_per_item = 1;
  // A bf16 cache through attention_scores_bf16 and attention_values_bf16; only if
  // have_bf16_dot() and head_dim <= kMaxBf16DotHeadDim.
  bool bf16_dot = false;
};

inline constexpr int kMaxRowsPerItem = 8;
inline constexpr int kMaxQueriesPerItem = 64;
inline constexpr int64_t kAttentionBlockFloats = 8192;  // widened entries per block: 32 KiB

// Per-thread buffers for attention_items, in floats (entries: ints). `width` is the widened
// floats per cache entry of an item: head_dim times the KV heads it reads.
int64_t attention_scores_floats(int64_t capacity);        // kMaxQueriesPerItem rows of scores
int64_t attention_block_entries(int64_t width);           // cache entries widened at a time
int64_t attention_block_floats(int64_t width);            // one block of widened keys or values
int64_t attention_acc_floats(int64_t head_dim);           // value sums of every query of an item
int64_t attention_query_bf16_elements(int64_t head_dim);  // bf16 queries of an item (dot path)
struct AttentionScratch {
  float* scores = nullptr;
  float* block = nullptr;
  float* acc = nullptr;
  int32_t* entries = nullptr;  // [kMaxRowsPerItem, capacity]
  uint16_t* q_bf16 = nullptr;  // [attention_query_bf16_elements] (dot path)
};

// Attention over a bf16 cache on CPUs with AVX512-BF16 (attention_bf16_dot.cc), for head_dim up
// to kMaxBf16DotHeadDim (the query's chunks stay in registers).
inline constexpr int64_t kMaxBf16DotHeadDim = 256;
// q rounded to bf16 (ties to even) into out ([bf16_x_stride(head_dim)], the padding zeroed).
void pack_query_bf16(const float* q, int64_t head_dim, uint16_t* out);
// While scoring, prefetch `bytes` of the entry `ahead` entries further on, below entry `limit`.
struct KeyPrefetch {
  int64_t bytes = 0;  // 0: no prefetches
  int64_t ahead = 0, limit = 0;
};
// scores[j] = scale * (q . keys[j * stride ...]) for j < n, q from pack_query_bf16; `first` is
// the entry number of keys[0] (for `fetch`). Each score's arithmetic depends only on q and its key.
void attention_scores_bf16(const uint16_t* q, const uint16_t* keys, int64_t stride, int64_t n,
                           int64_t head_dim, float scale, const KeyPrefetch& fetch, int64_t first,
                           float* scores);
// The n softmax weights p rounded to bf16 (ties to even), written over the start of p as n bf16.
void pack_weights_bf16(float* p, int64_t n);
// The value sums of one query over its list of n entries (weights from pack_weights_bf16), in
// pairs of list positions (k, k + 1), k even, one vdpbf16ps per pair and 32 elements of head_dim;
// a last entry without a partner pairs with a zero row. Adds the pairs that begin in
// [k_begin, k_end) into acc ([bf16_x_stride(head_dim)] f32 in the kernel's own order, zeroed
// before the first call); entry e's values are at values + e * stride.
void attention_values_bf16(const uint16_t* weights, const int32_t* entries, int64_t k_begin,
                           int64_t k_end, int64_t n, const uint16_t* values, int64_t stride,
                           int64_t head_dim, float* acc);
// out[d] = inv * value sum d, from attention_values_bf16's acc.
void attention_values_bf16_finish(const float* acc, int64_t head_dim, float inv, float* out);

// Computes items [begin, end) of n_row_blocks * n_heads / heads_per_item: item i is heads
// [(i / n_row_blocks) * heads_per_item, +heads_per_item) of row block i % n_row_blocks. Each
// (row, head) gets the same arithmetic whatever its item holds besides it, so its result depends
// only on what the row sees: not on the other rows, the row blocks or heads_per_item.
void attention_items(const AttentionArgs& args, int64_t begin, int64_t end,
                     const AttentionScratch& scratch);

// Name of the SIMD target the kernels dispatch to on this machine, e.g. "AVX2".
const char* simd_target_name();

}  // namespace specd::cpu
