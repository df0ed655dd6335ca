// Kernels for specd's load-time weight formats (int8 per output channel, int4 group 128; blocks
// as in backend/quant_ref.h, stored on the device in groups of 8 rows: int_rows.cuh): the small-M
// matmul, the dequantisation of weight slabs to bf16 for the prefill GEMM, and embedding lookups
// from a quantised (tied) table. The prefill's slab loop also serves GGUF's block formats (their
// dequantiser is in gguf_quant.cu).
//
// Small M (1 to 16 rows) on CUDA cores, where the tensor-core kernel (matmul_small_int.cu) does
// not apply (x rows not 16-byte aligned, or SPECD_CUDA_INT_MMA=0): a block of 8 warps owns 4
// output columns and reads each of their weight bytes once for all rows. Warp w takes the
// 128-element blocks w, w + 8, w + 16, ... of the columns (int4: pairs of blocks, one per
// half-warp); a lane dequantises 4 (int8) or 8 (int4) weights per block exactly as the reference
// does (d * q, or d * q + m with two roundings) and multiplies them into every row with fused
// multiply-adds in a fixed order. Lanes are reduced by a fixed shuffle tree and warps in warp
// order, so the order of every (row, column) sum depends only on K: rows are bit-identical
// whatever M.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/int_rows.cuh"
#include "backend/cuda/small_quant.cuh"

namespace specd::cuda {
namespace {

using small_quant::block_part;
using small_quant::ColumnGroup;
using small_quant::kCols;
using small_quant::kWarps;
using small_quant::store_columns;
constexpr int kBlockElems = kIntBlockElems;

// The 8 int4 weights of one lane: low nibbles (elements 4h..4h+3) then high (64 + 4h..).
__device__ __forceinline__ void dequant_int4(uint32_t header, uint32_t codes, float (&w)[8]) {
  const float d = half_value(header, 0), m = half_value(header, 1);
  const uint32_t lo = codes & 0x0F0F0F0Fu, hi = (codes >> 4) & 0x0F0F0F0Fu;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = __fadd_rn(__fmul_rn(d, byte_value(lo, e, 8388608.0f)), m);
    w[4 + e] = __fadd_rn(__fmul_rn(d, byte_value(hi, e, 8388608.0f)), m);
  }
}

// The 4 int8 weights of one lane (elements 4l..4l+3).
__device__ __forceinline__ void dequant_int8(uint32_t scale_bits, uint32_t codes, float (&w)[4]) {
  const float d = __uint_as_float(scale_bits);
  const uint32_t biased = codes ^ 0x80808080u;  // int8 q -> q + 128
#pragma unroll
  for (int e = 0; e < 4; ++e) w[e] = __fmul_rn(d, byte_value(biased, e, 8388736.0f));
}

// One block: kCols output columns of one part; kMaxM bounds the rows held in registers.
template <DType kType, int kMaxM>
__global__ void __launch_bounds__(kWarps * 32) small_int_kernel(ColumnGroup group) {
  __shared__ float partial[kWarps][kCols][kMaxM];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t n0;
  const MatmulArgs& a = block_part(group, &n0);
  constexpr bool kInt8 = kType == DType::kInt8;
  const int64_t blocks = a.k / kBlockElems;
  const IntLayout layout = int_layout(kType, a.w_stride);
  const auto* w = static_cast<const uint8_t*>(a.w);
  int64_t rows[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) rows[c] = std::min<int64_t>(n0 + c, a.n - 1);

  // Block sequence of this lane: int8 one block per warp step, int4 one per half-warp.
  const int64_t stride = kInt8 ? kWarps : 2 * kWarps;
  const int64_t first = kInt8 ? warp : 2 * warp + lane / 16;
  const int sub = kInt8 ? lane : lane % 16;  // word of the block's codes
  // Weight words (codes, header) of the current and the next block, loaded before the inputs.
  uint32_t code[kCols], head[kCols], next_code[kCols], next_head[kCols];
  auto load_block = [&](int64_t b, uint32_t(&cw)[kCols], uint32_t(&hw)[kCols]) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (b < blocks) {
        hw[c] = load_word(w + int_header_offset(layout, rows[c], b));
        cw[c] =
            load_word(w + int_code_offset(layout, rows[c], b * int_code_bytes(kType) + 4 * sub));
      } else {
        hw[c] = cw[c] = 0;
      }
    }
  };
  load_block(first, code, head);
  wait_for_inputs();
  allow_next_kernel();

  float acc[kCols][kMaxM];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) acc[c][m] = 0.0f;
  }
  for (int64_t b = first; b < blocks; b += stride) {
    load_block(b + stride, next_code, next_head);
    if constexpr (kInt8) {
      float wv[kCols][4];
#pragma unroll
      for (int c = 0; c < kCols; ++c) dequant_int8(head[c], code[c], wv[c]);
      const int64_t k = b * kBlockElems + 4 * sub;
#pragma unroll
      for (int m = 0; m < kMaxM; ++m) {
        if (m < a.m) {
          float xv[4];
          load4(a.x + m * a.x_stride + k, group.vector_x, xv);
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][m] = __fmaf_rn(wv[c][e], xv[e], acc[c][m]);
          }
        }
      }
    } else {
      float wv[kCols][8];
#pragma unroll
      for (int c = 0; c < kCols; ++c) dequant_int4(head[c], code[c], wv[c]);
      const int64_t k = b * kBlockElems + 4 * sub;
#pragma unroll
      for (int m = 0; m < kMaxM; ++m) {
        if (m < a.m) {
          float xl[4], xh[4];
          load4(a.x + m * a.x_stride + k, group.vector_x, xl);
          load4(a.x + m * a.x_stride + k + kBlockElems / 2, group.vector_x, xh);
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][m] = __fmaf_rn(wv[c][e], xl[e], acc[c][m]);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[c][m] = __fmaf_rn(wv[c][4 + e], xh[e], acc[c][m]);
          }
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      code[c] = next_code[c];
      head[c] = next_head[c];
    }
  }

  store_columns(acc, partial, a, n0);
}

template <DType kType>
void launch_small(const ColumnGroup& group, int64_t m, int64_t tiles, cudaStream_t stream) {
  launch_row_tiled(
      group, m, tiles, stream,
      [](auto rows) { return small_int_kernel<kType, decltype(rows)::value>; }, "small_int_kernel");
}

// Element i of row `row` of quantised weights `w` in the device layout.
__device__ __forceinline__ float dequant_at(const uint8_t* w, DType dtype, IntLayout layout,
                                            int64_t row, int64_t i) {
  const int64_t b = i / kBlockElems;
  const int j = static_cast<int>(i % kBlockElems);
  const int64_t codes = b * int_code_bytes(dtype);
  const uint32_t header = *reinterpret_cast<const uint32_t*>(w + int_header_offset(layout, row, b));
  if (dtype == DType::kInt8) {
    const auto code = static_cast<int8_t>(w[int_code_offset(layout, row, codes + j)]);
    return __fmul_rn(__uint_as_float(header), static_cast<float>(code));
  }
  const uint8_t byte = w[int_code_offset(layout, row, codes + j % (kBlockElems / 2))];
  const int code = j < kBlockElems / 2 ? byte & 0x0F : byte >> 4;
  return __fadd_rn(__fmul_rn(half_value(header, 0), static_cast<float>(code)),
                   half_value(header, 1));
}

__global__ void dequantize_bf16_kernel(const uint8_t* w, DType dtype, int64_t stride, int64_t rows,
                                       int64_t k, __nv_bfloat16* out) {
  const IntLayout layout = int_layout(dtype, stride);
  const int64_t total = rows * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, c = i % k;
    out[i] = __float2bfloat16_rn(dequant_at(w, dtype, layout, r, c));
  }
}

// The same values, 16 code bytes per thread (int8: 16 weights, int4: 32) read with one 16-byte
// load and written with 16-byte stores; weights 16-byte aligned.
template <DType kType>
__global__ void dequantize_bf16_wide_kernel(const uint8_t* w, int64_t stride, int64_t rows,
                                            int64_t k, __nv_bfloat16* out) {
  constexpr bool kInt8 = kType == DType::kInt8;
  constexpr int kChunks = kInt8 ? 8 : 4;  // 16-byte chunks of codes per block
  const IntLayout layout = int_layout(kType, stride);
  const int64_t per_row = k / kBlockElems * kChunks, total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, b = i % per_row / kChunks;
    const int q = static_cast<int>(i % kChunks);
    const int64_t at = int_code_offset(layout, r, b * int_code_bytes(kType) + 16 * q);
    const uint4 codes = __ldg(reinterpret_cast<const uint4*>(w + at));
    const uint32_t header =
        __ldg(reinterpret_cast<const uint32_t*>(w + int_header_offset(layout, r, b)));
    const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
    __nv_bfloat16* block_out = out + r * k + b * kBlockElems;
    __align__(16) __nv_bfloat16 lo[16], hi[16];
    const float d = kInt8 ? __uint_as_float(header) : half_value(header, 0);
    const float m = kInt8 ? 0.0f : half_value(header, 1);
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      const uint32_t byte = (words[e / 4] >> (8 * (e % 4))) & 0xFFu;
      if constexpr (kInt8) {
        const float code = static_cast<float>(static_cast<int8_t>(byte));
        lo[e] = __float2bfloat16_rn(__fmul_rn(d, code));
      } else {
        lo[e] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(d, static_cast<float>(byte & 0x0F)), m));
        hi[e] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(d, static_cast<float>(byte >> 4)), m));
      }
    }
    auto store16 = [](__nv_bfloat16* to, const __nv_bfloat16(&v)[16]) {
      reinterpret_cast<uint4*>(to)[0] = reinterpret_cast<const uint4*>(v)[0];
      reinterpret_cast<uint4*>(to)[1] = reinterpret_cast<const uint4*>(v)[1];
    };
    store16(block_out + 16 * q, lo);
    if constexpr (!kInt8) store16(block_out + kBlockElems / 2 + 16 * q, hi);
  }
}

__global__ void embedding_int_kernel(const int32_t* ids, const uint8_t* table, DType dtype,
                                     int64_t stride, int64_t vocab, int64_t dim, float* out,
                                     int64_t out_stride) {
  const IntLayout layout = int_layout(dtype, stride);
  wait_for_inputs();
  allow_next_kernel();
  const int64_t m = blockIdx.x;
  const int64_t id = ids[m];
  if (id < 0 || id >= vocab) return;  // checked on the host; never read outside the table
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    out[m * out_stride + d] = dequant_at(table, dtype, layout, id, d);
  }
}

}  // namespace

bool int_quant_dtype(DType dtype) { return dtype == DType::kInt8 || dtype == DType::kInt4; }

size_t int_weight_bytes(DType dtype, int64_t rows, int64_t stride) {
  const int64_t groups = (rows + kIntGroupRows - 1) / kIntGroupRows;
  return static_cast<size_t>(groups * int_layout(dtype, stride).group_bytes);
}

void to_device_int_layout(const void* blocks, DType dtype, int64_t rows, int64_t stride,
                          void* out) {
  const int64_t n_blocks = stride / kBlockElems;
  const int block_bytes = int_block_bytes(dtype), code_bytes = int_code_bytes(dtype);
  const IntLayout layout = int_layout(dtype, stride);
  auto* dst = static_cast<uint8_t*>(out);
  const std::vector<uint8_t> zeros(block_bytes, 0);  // the padding rows of the last group
  const int64_t padded = (rows + kIntGroupRows - 1) / kIntGroupRows * kIntGroupRows;
  for (int64_t r = 0; r < padded; ++r) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block =
          r < rows ? static_cast<const uint8_t*>(blocks) + (r * n_blocks + b) * block_bytes
                   : zeros.data();
      std::memcpy(dst + int_header_offset(layout, r, b), block, 4);
      for (int at = 0; at < code_bytes; at += kIntPieceBytes) {
        std::memcpy(dst + int_code_offset(layout, r, b * code_bytes + at), block + 4 + at,
                    kIntPieceBytes);
      }
    }
  }
}

void matmul_int_small(const MatmulGroup& group, cudaStream_t stream) {
  int64_t tiles;
  const ColumnGroup g = small_quant::column_group(
      group,
      [](const MatmulArgs& a) {
        return a.k % kBlockElems == 0 && a.w_stride % kBlockElems == 0 &&
               int_quant_dtype(a.w_dtype);
      },
      "cuda int8/int4 matmul: K must be whole 128-element blocks and M <= 16", &tiles);
  if (tiles == 0 || group.part[0].m == 0) return;
  if (group.part[0].w_dtype == DType::kInt8) {
    launch_small<DType::kInt8>(g, group.part[0].m, tiles, stream);
  } else {
    launch_small<DType::kInt4>(g, group.part[0].m, tiles, stream);
  }
}

int64_t dequant_slab_rows(int64_t k) {
  // About 32 M bf16 elements (64 MiB) per slab, a multiple of the GEMM's 128-row tiles.
  const int64_t rows = (int64_t{32} << 20) / std::max<int64_t>(k, 1);
  return std::max<int64_t>(128, rows / 128 * 128);
}

void matmul_quant_gemm(const MatmulArgs& a, void* slab, cudaStream_t stream,
                       const std::function<void(const MatmulArgs& part)>& gemm) {
  const bool block_format = block_quant_dtype(a.w_dtype);
  if (!block_format && !int_quant_dtype(a.w_dtype)) {
    fail_message("cuda quantised GEMM: the weights are not in a quantised format");
  }
  const int64_t slab_rows = dequant_slab_rows(a.k);  // whole groups of 8 int8/int4 rows
  const auto row_bytes = static_cast<int64_t>(dtype_row_bytes(a.w_dtype, a.w_stride));
  for (int64_t n0 = 0; n0 < a.n; n0 += slab_rows) {
    const int64_t rows = std::min(slab_rows, a.n - n0);
    const auto* w =
        static_cast<const uint8_t*>(a.w) +
        (block_format ? n0 * row_bytes : int_group_offset(int_layout(a.w_dtype, a.w_stride), n0));
    if (block_format) {
      dequantize_block_bf16(w, a.w_dtype, row_bytes, rows, a.k, slab, stream);
    } else if (reinterpret_cast<uintptr_t>(w) % 16 == 0) {
      const int64_t chunks = rows * a.k / 16;  // at least 16 codes per thread
      const auto blocks = static_cast<unsigned>(std::min<int64_t>((chunks + 255) / 256, 8192));
      auto* bf16 = static_cast<__nv_bfloat16*>(slab);
      if (a.w_dtype == DType::kInt8) {
        dequantize_bf16_wide_kernel<DType::kInt8>
            <<<blocks, 256, 0, stream>>>(w, a.w_stride, rows, a.k, bf16);
      } else {
        dequantize_bf16_wide_kernel<DType::kInt4>
            <<<blocks, 256, 0, stream>>>(w, a.w_stride, rows, a.k, bf16);
      }
      check(cudaGetLastError(), "dequantize_bf16_wide_kernel");
    } else {
      const int64_t elems = rows * a.k;
      const auto blocks = static_cast<unsigned>(std::min<int64_t>((elems + 255) / 256, 8192));
      dequantize_bf16_kernel<<<blocks, 256, 0, stream>>>(w, a.w_dtype, a.w_stride, rows, a.k,
                                                         static_cast<__nv_bfloat16*>(slab));
      check(cudaGetLastError(), "dequantize_bf16_kernel");
    }
    MatmulArgs part = a;
    part.w = slab;
    part.w_dtype = DType::kBF16;
    part.w_stride = a.k;
    part.n = rows;
    part.y = a.y + n0;
    if (a.bias != nullptr) {
      const size_t size = a.bias_dtype == DType::kF32 ? 4 : 2;
      part.bias = static_cast<const char*>(a.bias) + n0 * size;
    }
    gemm(part);
  }
}

void embedding_int(const int32_t* ids, int64_t m, const void* table, DType table_dtype,
                   int64_t table_stride, int64_t vocab, int64_t dim, float* out, int64_t out_stride,
                   cudaStream_t stream) {
  Launch launch(dim3(static_cast<unsigned>(m)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, embedding_int_kernel, ids,
                           static_cast<const uint8_t*>(table), table_dtype, table_stride, vocab,
                           dim, out, out_stride),
        "embedding_int_kernel");
}

}  // namespace specd::cuda
