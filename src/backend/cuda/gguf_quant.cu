// Kernels for GGUF's block-quantised weights (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k),
// kept in their blocks in GPU memory: the small-M matmul, the dequantisation of weight slabs to
// bf16 for the prefill GEMM, and embedding lookups from a block-quantised (tied) table.
//
// Small M (1 to 16 rows): a block of 8 warps owns 4 output columns and reads each of their
// weight bytes once for all rows. Warp w takes the 256-element chunks w, w + 8, w + 16, ... of
// the columns; a lane dequantises its 8 weights of a chunk exactly as the reference does
// (gguf_dequant.cuh) and multiplies them into every row with fused multiply-adds in a fixed
// order. Lanes are reduced by a fixed shuffle tree and warps in warp order, so the order of every
// (row, column) sum depends only on K: rows are bit-identical whatever M.
#include <algorithm>

#include "backend/cuda/gguf_dequant.cuh"
#include "backend/cuda/small_quant.cuh"

namespace specd::cuda {
namespace {

using gguf::kChunkElems;
using gguf::LaneSlot;

using small_quant::block_part;
using small_quant::ColumnGroup;
using small_quant::kCols;
using small_quant::kWarps;
using small_quant::store_columns;

// Calls fn(F{}) with the format of `dtype`.
template <class Fn>
void with_format(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kQ8_0:
      return fn(gguf::Q8_0{});
    case DType::kQ4_0:
      return fn(gguf::Q4_0{});
    case DType::kQ4_1:
      return fn(gguf::Q4_1{});
    case DType::kQ5_0:
      return fn(gguf::Q5_0{});
    case DType::kQ5_1:
      return fn(gguf::Q5_1{});
    case DType::kQ4_K:
      return fn(gguf::Q4_K{});
    case DType::kQ5_K:
      return fn(gguf::Q5_K{});
    case DType::kQ6_K:
      return fn(gguf::Q6_K{});
    default:
      fail_message("cuda: no block-quantised kernel for this dtype");
  }
}

// Bytes of a weight row of `stride` elements.
template <class F>
__host__ __device__ int64_t row_bytes_of(int64_t stride) {
  return stride / F::kElems * F::kBytes;
}

// One block: kCols output columns of one part; kMaxM bounds the rows held in registers.
template <class F, int kMaxM>
__global__ void __launch_bounds__(kWarps * 32) small_block_kernel(ColumnGroup group) {
  __shared__ float partial[kWarps][kCols][kMaxM];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t n0;
  const MatmulArgs& a = block_part(group, &n0);
  const int64_t blocks = a.k / F::kElems;
  const int64_t chunks = (a.k + kChunkElems - 1) / kChunkElems;
  const int64_t row_bytes = row_bytes_of<F>(a.w_stride);
  const auto* w = static_cast<const uint8_t*>(a.w);
  const uint8_t* rows[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) rows[c] = w + std::min<int64_t>(n0 + c, a.n - 1) * row_bytes;

  // Weight words of the current and the next chunk, loaded before the inputs.
  uint32_t cur[kCols][F::kWords], next[kCols][F::kWords];
  auto load_chunk = [&](int64_t chunk, uint32_t(&v)[kCols][F::kWords]) {
    const LaneSlot<F> s(chunk, lane);
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (chunk < chunks && s.block < blocks) {
        F::load(rows[c] + s.block * F::kBytes, s.part, v[c]);
      } else {
#pragma unroll
        for (int i = 0; i < F::kWords; ++i) v[c][i] = 0;
      }
    }
  };
  load_chunk(warp, cur);
  wait_for_inputs();
  allow_next_kernel();

  float acc[kCols][kMaxM];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) acc[c][m] = 0.0f;
  }
  for (int64_t chunk = warp; chunk < chunks; chunk += kWarps) {
    load_chunk(chunk + kWarps, next);
    const LaneSlot<F> s(chunk, lane);
    if (s.block < blocks) {  // lanes past the row's end (its last chunk) add nothing
      float wv[kCols][8];
#pragma unroll
      for (int c = 0; c < kCols; ++c) F::dequant(cur[c], s.part, wv[c]);
      const int64_t k0 = s.offset(0), k1 = s.offset(1);
#pragma unroll
      for (int m = 0; m < kMaxM; ++m) {
        if (m < a.m) {
          float x0[4], x1[4];
          load4(a.x + m * a.x_stride + k0, group.vector_x, x0);
          load4(a.x + m * a.x_stride + k1, group.vector_x, x1);
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][m] = __fmaf_rn(wv[c][e], x0[e], acc[c][m]);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][m] = __fmaf_rn(wv[c][4 + e], x1[e], acc[c][m]);
          }
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
      for (int i = 0; i < F::kWords; ++i) cur[c][i] = next[c][i];
    }
  }

  store_columns(acc, partial, a, n0);
}

template <class F>
void launch_small(const ColumnGroup& group, int64_t m, int64_t tiles, cudaStream_t stream) {
  launch_row_tiled(
      group, m, tiles, stream,
      [](auto rows) { return small_block_kernel<F, decltype(rows)::value>; }, "small_block_kernel");
}

// Dequantises the lane's 8 weights of `chunk` of `row` into w; false (w untouched) when the
// lane's block is past the row's `blocks`. k0, k1: the element offsets of its two runs of 4.
template <class F>
__device__ __forceinline__ bool dequant_unit(const uint8_t* row, int64_t blocks, int64_t chunk,
                                             int lane, float (&w)[8], int64_t* k0, int64_t* k1) {
  const LaneSlot<F> s(chunk, lane);
  if (s.block >= blocks) return false;
  uint32_t v[F::kWords];
  F::load(row + s.block * F::kBytes, s.part, v);
  F::dequant(v, s.part, w);
  *k0 = s.offset(0);
  *k1 = s.offset(1);
  return true;
}

// out [rows, k] bf16 = the weight rows [rows, k] (row_bytes apart), one thread per lane unit.
template <class F>
__global__ void dequantize_block_bf16_kernel(const uint8_t* w, int64_t row_bytes, int64_t rows,
                                             int64_t k, __nv_bfloat16* out) {
  const int64_t blocks = k / F::kElems;
  const int64_t units = (k + kChunkElems - 1) / kChunkElems * 32;  // per row
  const int64_t total = rows * units;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / units, u = i % units;
    float v[8];
    int64_t k0, k1;
    if (!dequant_unit<F>(w + r * row_bytes, blocks, u / 32, static_cast<int>(u % 32), v, &k0,
                         &k1)) {
      continue;
    }
    __nv_bfloat16* o = out + r * k;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      o[k0 + e] = __float2bfloat16_rn(v[e]);
      o[k1 + e] = __float2bfloat16_rn(v[4 + e]);
    }
  }
}

// out[m] [dim] f32 = row ids[m] of the table [vocab, dim], one block per id.
template <class F>
__global__ void embedding_block_kernel(const int32_t* ids, const uint8_t* table, int64_t row_bytes,
                                       int64_t vocab, int64_t dim, float* out, int64_t out_stride) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t m = blockIdx.x;
  const int64_t id = ids[m];
  if (id < 0 || id >= vocab) return;  // checked on the host; never read outside the table
  const int64_t blocks = dim / F::kElems;
  const int64_t units = (dim + kChunkElems - 1) / kChunkElems * 32;
  float* o = out + m * out_stride;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    float v[8];
    int64_t k0, k1;
    if (!dequant_unit<F>(table + id * row_bytes, blocks, u / 32, static_cast<int>(u % 32), v, &k0,
                         &k1)) {
      continue;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      o[k0 + e] = v[e];
      o[k1 + e] = v[4 + e];
    }
  }
}

}  // namespace

bool block_quant_dtype(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void matmul_block_small(const MatmulGroup& group, cudaStream_t stream) {
  const DType dtype = group.part[0].w_dtype;
  with_format(dtype, [&](auto format) {
    using F = decltype(format);
    int64_t tiles;
    const ColumnGroup g = small_quant::column_group(
        group,
        [](const MatmulArgs& a) {
          return a.k % F::kElems == 0 && a.w_stride % F::kElems == 0 &&
                 reinterpret_cast<uintptr_t>(a.w) % 4 == 0;
        },
        "cuda block-quantised matmul: K must be whole blocks, M <= 16, one weight dtype and "
        "4-byte aligned weights",
        &tiles);
    if (tiles == 0 || group.part[0].m == 0) return;
    launch_small<F>(g, group.part[0].m, tiles, stream);
  });
}

void dequantize_block_bf16(const void* w, DType dtype, int64_t row_bytes, int64_t rows, int64_t k,
                           void* out, cudaStream_t stream) {
  with_format(dtype, [&](auto format) {
    using F = decltype(format);
    if (k % F::kElems != 0 || reinterpret_cast<uintptr_t>(w) % 4 != 0 || row_bytes % 2 != 0) {
      fail_message("cuda block dequantisation: K must be whole blocks of aligned rows");
    }
    const int64_t units = rows * ((k + kChunkElems - 1) / kChunkElems) * 32;
    if (units == 0) return;
    const auto grid = static_cast<unsigned>(std::min<int64_t>((units + 255) / 256, 8192));
    dequantize_block_bf16_kernel<F><<<grid, 256, 0, stream>>>(
        static_cast<const uint8_t*>(w), row_bytes, rows, k, static_cast<__nv_bfloat16*>(out));
    check(cudaGetLastError(), "dequantize_block_bf16_kernel");
  });
}

void embedding_block(const int32_t* ids, int64_t m, const void* table, DType table_dtype,
                     int64_t table_stride, int64_t vocab, int64_t dim, float* out,
                     int64_t out_stride, cudaStream_t stream) {
  with_format(table_dtype, [&](auto format) {
    using F = decltype(format);
    if (dim % F::kElems != 0 || reinterpret_cast<uintptr_t>(table) % 4 != 0) {
      fail_message("cuda block-quantised embedding: rows must be whole, aligned blocks");
    }
    Launch launch(dim3(static_cast<unsigned>(m)), dim3(256), 0, stream);
    check(cudaLaunchKernelEx(&launch.config, embedding_block_kernel<F>, ids,
                             static_cast<const uint8_t*>(table), row_bytes_of<F>(table_stride),
                             vocab, dim, out, out_stride),
          "embedding_block_kernel");
  });
}

}  // namespace specd::cuda
