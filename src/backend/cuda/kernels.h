// Host-side interface of the CUDA kernels: argument structs and launchers (all asynchronous on
// the given stream). Compiles with the host compiler; the kernels live in the .cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/activation.h"
#include "core/dtype.h"

namespace specd::cuda {

// Throws specd::Error with the CUDA error string when `status` is not cudaSuccess.
void check(cudaError_t status, const char* what);
// Throws specd::Error with `message` (for the .cu files, which do not use fmt).
[[noreturn]] void fail_message(const std::string& message);

// ---- launchers (all asynchronous on `stream`) ----

// A folded RMSNorm (Backend's FoldedNorm) at the matmul that updates the residual stream r: after
// y (= r) is stored, scaled = r ⊙ weight and sums[row, j] = Σ r[row, c]² over the tile's columns
// 16j .. 16j + 15. Only on the small-M tensor-core kernels, one part, N = the norm's width.
struct NormOut {
  float* scaled = nullptr;  // [M, N] f32
  int64_t scaled_stride = 0;
  const void* weight = nullptr;  // [N]
  DType weight_dtype = DType::kF32;
  float* sums = nullptr;  // [M, ceil(N / 16)] f32; nullptr: no norm out
  int64_t sums_stride = 0;
};
// A folded RMSNorm at a matmul that reads the scaled rows as x: every product row is multiplied
// by 1 / sqrt(Σ_j sums[row, j] / cols + eps) before the bias.
struct NormIn {
  const float* sums = nullptr;  // [M, tiles] f32; nullptr: no norm in
  int64_t sums_stride = 0, tiles = 0;
  float cols = 0.0f, eps = 0.0f;
};

// A part of a q/k/v group whose tile epilogue does rope_store_kv's work (see
// Backend::qkv_rope_store_kv). With half > 0 each 16-column tile holds 8 columns of one head's
// first half and their partners half further (tile_column in small_mma.cuh), which the epilogue
// rotates as rope_store_kv does; with `cache` set the values go to each row's cache entry
// (slots, cache_index) instead of y.
struct QkvOut {
  int half = 0;  // head_dim / 2 of the rotated heads, a power of two (8 or more); 0: no rotation
  const int32_t* positions = nullptr;  // [M]
  const float* cos = nullptr;          // [table_rows, half]
  const float* sin = nullptr;
  int64_t table_stride = 0, table_rows = 0;
  void* cache = nullptr;  // the layer's K or V cache [n_slots, capacity, N], or nullptr: write y
  DType cache_dtype = DType::kBF16;
  int64_t capacity = 0, n_slots = 0, slot_stride = 0;
  const int32_t* slots = nullptr;        // [M]
  const int32_t* cache_index = nullptr;  // [M]
};

struct MatmulArgs {
  const float* x = nullptr;  // [M, K] f32
  int64_t x_stride = 0;
  const void* w = nullptr;  // [N, K] f32/f16/bf16, int8/int4 or GGUF blocks
  DType w_dtype = DType::kBF16;
  int64_t w_stride = 0;
  const void* bias = nullptr;  // [N] or nullptr
  DType bias_dtype = DType::kF32;
  float* y = nullptr;  // [M, N] f32
  int64_t y_stride = 0;
  int64_t m = 0, n = 0, k = 0;
  bool accumulate = false;
  // Gated x (a gated MLP's down projection): the product reads act(gate) * x, with the bits of
  // silu_mul / gelu_tanh_mul. Only where small_gate_fusable says so.
  const float* gate = nullptr;  // [M, K] f32, row stride gate_stride
  int64_t gate_stride = 0;
  Activation gate_act = Activation::kSilu;
  NormOut norm_out;
  NormIn norm_in;
  QkvOut qkv;  // only on the small-M tensor-core kernels
};

// Scratch the matmul launchers need, owned by the backend (grown, never shrunk).
struct MatmulScratch {
  float* partials = nullptr;  // split-K partial sums
  size_t partial_floats = 0;
  unsigned* tickets = nullptr;  // one counter per output tile, zero between launches
  void* x_bf16 = nullptr;       // GEMM operand copy of x (bf16)
  size_t x_bf16_elems = 0;
  void* x_int8 = nullptr;     // int8/int4 tensor-core kernels: x as two int8 parts per block
  bool x_int8_ready = false;  // x_int8 holds x already (written by the op before: attention)
};

// Up to 3 matmuls of the same x (and M, K, weight dtype) in one launch, e.g. q/k/v or gate/up.
struct MatmulGroup {
  static constexpr int kMaxParts = 3;
  MatmulArgs part[kMaxParts];
  int64_t tile_end[kMaxParts] = {};  // cumulative 16-column tiles
  int count = 0;
  // A gated MLP's gate (part 0) and up (part 1) projections, bf16 on tensor cores: tile t holds
  // gate rows [8t, 8t + 8) and up rows [8t, 8t + 8), and part 0's y receives act(gate) * up
  // with the bits of the separate products and silu_mul / gelu_tanh_mul (part 1's y is not
  // written). tile_end: ceil(N / 8) for both parts. See gate_up_pair_group.
  bool gate_up_pair = false;
  Activation pair_act = Activation::kSilu;
};
// The gate/up pair group of the products `gate` and `up` (x · w_gateᵀ, x · w_upᵀ), writing
// act(gate) * up into gate.y; count == 0 where the small-M bf16 tensor-core kernel does not take
// it (the caller runs the products and the activation separately).
MatmulGroup gate_up_pair_group(Activation act, const MatmulArgs& gate, const MatmulArgs& up);

// How the small-M kernel splits a group; depends on the weights' shapes and the GPU only.
struct SmallMatmulPlan {
  bool tensor_cores = false;  // every part takes small_tensor_cores (bf16, int8 or int4)
  int64_t tiles = 0;          // output tiles of 16 columns
  int block_splits = 1;       // blocks sharing one tile (K ranges), reduced in a fixed order
  int64_t grid_x = 0;         // blocks per split; each loops over tiles grid_x apart
  // int8/int4 with up to 4 rows: x's two parts side by side in one mma (matmul_small_int.cu)
  bool stacked_x = true;
};
SmallMatmulPlan plan_small_matmul(const MatmulGroup& group, int multiprocessors);
// The small-M tensor-core kernels take this product: bf16 weights (K % 8 == 0, 16-byte aligned
// rows) or int8/int4 (K whole 128-element blocks, rows of a multiple of 4 blocks, weights 16-byte
// aligned), x rows 16-byte aligned.
bool small_tensor_cores(const MatmulArgs& a);
// The int8/int4 tensor-core kernels take a gated x (a.gate set; combined while x is quantised):
// a product they take, gate rows 16-byte aligned.
bool small_gate_fusable(const MatmulArgs& a);
size_t small_matmul_partial_floats(const SmallMatmulPlan& plan);
// Bytes of MatmulScratch::x_int8 for int8/int4 weights on tensor cores (x [M, K]).
size_t small_int_x_bytes(int64_t m, int64_t k);
// y = x · wᵀ for each part, M <= 16; batch-invariant (a row's bits never depend on the others).
void matmul_small(const MatmulGroup& group, const SmallMatmulPlan& plan,
                  const MatmulScratch& scratch, cudaStream_t stream);
// y = x · wᵀ for any M with bf16 tensor cores on a bf16 copy of x (prefill).
void matmul_gemm(const MatmulArgs& a, const MatmulScratch& scratch, cudaStream_t stream);
bool gemm_supported(const MatmulArgs& a);
// scratch.x_bf16 [M, K] (contiguous) = x rounded to bf16, the GEMMs' operand.
void round_x_bf16(const MatmulArgs& a, const MatmulScratch& scratch, cudaStream_t stream);
// y[r, c] += bias[c] for every row (after a GEMM that leaves the bias out); nothing without one.
void add_bias(const MatmulArgs& a, cudaStream_t stream);

// specd's load-time formats (kInt8, kInt4; int_quant.cu). K and w_stride whole 128-element
// blocks. On the device the rows are stored in groups of 8, codes in 64-byte pieces side by side,
// then the headers (int_rows.cuh).
bool int_quant_dtype(DType dtype);
// Bytes of [rows, stride] weights in the device layout (rows rounded up to groups of 8).
size_t int_weight_bytes(DType dtype, int64_t rows, int64_t stride);
// out (int_weight_bytes) = the host blocks [rows, stride] in the device layout, padding rows zero.
void to_device_int_layout(const void* blocks, DType dtype, int64_t rows, int64_t stride, void* out);
// y = x · wᵀ for each part (same x, M <= 16, one weight dtype); batch-invariant.
void matmul_int_small(const MatmulGroup& group, cudaStream_t stream);
// Embedding rows dequantised from an int8/int4 table (a tied LM head).
void embedding_int(const int32_t* ids, int64_t m, const void* table, DType table_dtype,
                   int64_t table_stride, int64_t vocab, int64_t dim, float* out, int64_t out_stride,
                   cudaStream_t stream);

// GGUF's block formats (kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K, kQ5_K, kQ6_K; gguf_quant.cu),
// dequantised exactly as backend/quant_ref.h. K and w_stride whole blocks, weights 4-byte
// aligned.
bool block_quant_dtype(DType dtype);
// Weights in a quantised format with CUDA kernels: int8/int4 or GGUF blocks.
inline bool quant_kernel_dtype(DType dtype) {
  return int_quant_dtype(dtype) || block_quant_dtype(dtype);
}
// y = x · wᵀ for each part (x [M, K] f32, w [N, K] blocks, y [M, N] f32; same x, M <= 16, one
// weight dtype); batch-invariant.
void matmul_block_small(const MatmulGroup& group, cudaStream_t stream);
// out [rows, k] bf16 = the weight rows w [rows, k] (blocks, row_bytes apart), dequantised.
void dequantize_block_bf16(const void* w, DType dtype, int64_t row_bytes, int64_t rows, int64_t k,
                           void* out, cudaStream_t stream);
// Embedding rows (out [m, dim] f32) dequantised from a block-quantised table [vocab, dim].
void embedding_block(const int32_t* ids, int64_t m, const void* table, DType table_dtype,
                     int64_t table_stride, int64_t vocab, int64_t dim, float* out,
                     int64_t out_stride, cudaStream_t stream);

// Prefill with int8/int4 or block-quantised weights (int_quant.cu).
// Weight rows per bf16 slab (the slab holds that many rows of K).
int64_t dequant_slab_rows(int64_t k);
// Dequantises slabs of weight rows to bf16 in `slab` and runs `gemm` (a bf16 GEMM on the same
// stream, e.g. matmul_gemm) on each slab's part of the product.
void matmul_quant_gemm(const MatmulArgs& a, void* slab, cudaStream_t stream,
                       const std::function<void(const MatmulArgs& part)>& gemm);

void embedding(const int32_t* ids, int64_t m, const void* table, DType table_dtype,
               int64_t table_stride, int64_t vocab, int64_t dim, float* out, int64_t out_stride,
               cudaStream_t stream);
// weight [cols] must not be written by earlier kernels of the stream (it is read before the
// kernel waits for them).
void rms_norm(const float* x, int64_t x_stride, const void* weight, DType weight_dtype, float eps,
              float* y, int64_t y_stride, int64_t rows, int64_t cols, cudaStream_t stream);
// A folded norm (NormOut) of r [rows, cols] f32 without a matmul: out.scaled and out.sums.
void fold_norm(const float* r, int64_t r_stride, int64_t rows, int64_t cols, const NormOut& out,
               cudaStream_t stream);
// scaled [rows, cols] f32 (r ⊙ weight) *= each row's inverse RMS from in.sums: rms_norm(r).
void unfold_norm(float* scaled, int64_t stride, int64_t rows, int64_t cols, const NormIn& in,
                 cudaStream_t stream);
void rope(float* x, int64_t stride, int64_t rows, int n_heads, int half, const int32_t* positions,
          const float* cos, const float* sin, int64_t table_stride, int64_t table_rows,
          cudaStream_t stream);
void silu_mul(const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
              float* out, int64_t out_stride, int64_t rows, int64_t cols, cudaStream_t stream);
void gelu_tanh_mul(const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                   float* out, int64_t out_stride, int64_t rows, int64_t cols, cudaStream_t stream);
void scale(float* x, int64_t stride, int64_t rows, int64_t cols, float s, cudaStream_t stream);
void add(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t rows, int64_t cols,
         cudaStream_t stream);

struct CacheArgs {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kBF16;
  int64_t capacity = 0, n_slots = 0, slot_stride = 0;
  int n_kv_heads = 0, head_dim = 0;
};
void store_kv(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t m,
              const CacheArgs& cache, const int32_t* slots, const int32_t* cache_index,
              cudaStream_t stream);

// ids[r] = the column of row r's largest logit, as reference::argmax_rows picks it. `scratch`:
// argmax_scratch_bytes(rows, cols), zero before the first launch (launches leave it so).
size_t argmax_scratch_bytes(int64_t rows, int64_t cols);
void argmax_rows(const float* logits, int64_t stride, int64_t rows, int64_t cols, int32_t* ids,
                 void* scratch, cudaStream_t stream);

// Sampling of logits rows as Sampler::distribution and Sampler::sample_from do it: per row the
// inverse temperature (0 = greedy: the argmax), top-k (0 = off), top-p (1 = off), min-p (0 = off)
// and the uniform u of the inverse-CDF draw. ids[first_row + r] = the token, -1 if no logit is
// finite.
struct SampleRow {
  double inv_temperature = 0.0, top_p = 1.0, min_p = 0.0, u = 0.0;
  int top_k = 0;
  bool sliced = false;  // drawn over many blocks (sample_row_sliced; set by sample_rows)
};
struct SampleRowsArgs {
  static constexpr int kMaxRows = 16;
  const float* logits = nullptr;  // [first_row + rows, cols] f32
  int64_t stride = 0, first_row = 0;
  int rows = 0, cols = 0;
  float* weights = nullptr;  // [rows, cols] f32 scratch
  int32_t* ids = nullptr;
  float* probs = nullptr;  // or [first_row + rows, probs_stride] f32: the kept distribution
  int64_t probs_stride = 0;
  SampleRow row[kMaxRows];
};
// `slice_scratch`: sample_slices_scratch_bytes(cols), zero before the first launch.
void sample_rows(const SampleRowsArgs& args, void* slice_scratch, cudaStream_t stream);
// Rows with a temperature only, over more than 8,192 columns, without probs, are drawn over many
// blocks (sample_slices.cu): the same weights, their sums in another order.
bool sample_row_sliced(const SampleRow& row, int cols, bool writes_probs);
size_t sample_slices_scratch_bytes(int64_t cols);
void sample_rows_sliced(const SampleRowsArgs& args, void* scratch, cudaStream_t stream);

// Speculative sampling of k = rows - 1 sampled draft tokens (see Backend::verify_sampled).
struct VerifySampledArgs {
  static constexpr int kMaxRows = 16;
  const float* logits = nullptr;  // [rows, cols] f32: the target's rows
  int64_t stride = 0;
  const float* q = nullptr;  // [rows - 1, q_stride] f32: the draft's distributions
  int64_t q_stride = 0;
  int rows = 0, cols = 0;
  float* weights = nullptr;  // [rows, cols] f32 scratch
  int32_t* ids = nullptr;    // [rows]
  SampleRow sampling;        // the request's settings (its u unused)
  int32_t draft[kMaxRows] = {};
  // The draft tokens on the device in place of `draft`; a row whose token is outside the
  // vocabulary gets id -1.
  const int32_t* device_draft = nullptr;
  double u_accept[kMaxRows] = {}, u_resample[kMaxRows] = {};
  double u_sample = 0.0;  // the last row's draw
};
void verify_sampled(const VerifySampledArgs& args, cudaStream_t stream);

// rope on q and k, then k and v into the cache (one launch).
struct RopeStoreArgs {
  float* q = nullptr;  // [M, n_heads * 2 * half] f32, rotated in place
  int64_t q_stride = 0;
  float* k = nullptr;  // [M, n_kv_heads * 2 * half] f32, rotated in place, then stored
  int64_t k_stride = 0;
  const float* v = nullptr;  // [M, n_kv_heads * 2 * half] f32
  int64_t v_stride = 0;
  int64_t m = 0;
  int n_heads = 0, half = 0;
  const int32_t* positions = nullptr;
  const float* cos = nullptr;  // [table_rows, half]
  const float* sin = nullptr;
  int64_t table_stride = 0, table_rows = 0;
  CacheArgs cache;
  const int32_t* slots = nullptr;
  const int32_t* cache_index = nullptr;
  // qk_norm_rope_store_kv: each head's RMSNorm weights [2 * half] (q's, k's) and epsilon.
  const void* q_norm = nullptr;
  const void* k_norm = nullptr;
  DType q_norm_dtype = DType::kF32, k_norm_dtype = DType::kF32;
  float eps = 0.0f;
};
void rope_store_kv(const RopeStoreArgs& a, cudaStream_t stream);
// The same after an RMSNorm of each q and k head (one block per row and head).
void qk_norm_rope_store_kv(const RopeStoreArgs& a, cudaStream_t stream);

struct AttentionArgs {
  const float* q = nullptr;  // [M, n_heads * head_dim]
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  CacheArgs cache;
  int n_heads = 0;
  int64_t m = 0;
  float scale = 1.0f;
  const int32_t* slots = nullptr;
  const int32_t* cache_index = nullptr;  // causal rows, or nullptr when masked
  const int32_t* mask_start = nullptr;   // masked rows
  const int32_t* mask = nullptr;         // [M, mask_cols]
  int64_t mask_cols = 0, mask_stride = 0;
  int64_t window = 0;                  // > 0: entries j <= positions[m] - window are hidden
  const int32_t* positions = nullptr;  // with a window
  // The cache entries below each row's own (and its slot's other rows') were written before the
  // kernel preceding attention, which writes only the rows' entries: blocks may read those, and
  // the index arrays, before waiting for that kernel (AttentionRows::settled).
  bool settled = false;
  // With head_dim 128 (a head is one 128-element block): out is also written into this scratch
  // as the int8/int4 tensor-core matmul's x (small_int_x_bytes(m, n_heads * 128)), or nullptr.
  void* x_int8 = nullptr;
};
// Entries per attention split: depends on the cache capacity only (so rows stay invariant).
int64_t attention_chunk(int64_t capacity);
size_t attention_partial_floats(const AttentionArgs& a);
void attention(const AttentionArgs& a, float* partials, cudaStream_t stream);
// Causal rows of one cache slot on tensor cores (prefill): bf16 cache, head dim 64, 128 or 256,
// no mask, q 16-byte aligned. Not bit-identical to attention(); used above kSmallBatch rows.
bool prefill_attention_supported(const AttentionArgs& a);
void prefill_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace specd::cuda
