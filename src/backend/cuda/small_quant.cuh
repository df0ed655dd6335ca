// The parts the small-M quantised matmul kernels share (int_quant.cu, gguf_quant.cu): blocks of
// 8 warps owning 4 output columns of one part of a group, and the fixed-order reduction of
// their sums (lanes by a shuffle tree, then warps in warp order), so that every (row, column)
// sum is computed in an order that depends only on K.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.h"

namespace specd::cuda::small_quant {

constexpr int kWarps = 8;
constexpr int kCols = 4;  // output columns per block

// The parts of one launch and where each one's blocks end.
struct ColumnGroup {
  MatmulArgs part[MatmulGroup::kMaxParts];
  int64_t tile_end[MatmulGroup::kMaxParts];  // cumulative blocks of kCols columns
  int count;
  bool vector_x;  // x rows 16-byte aligned
};

// The launch description of `group` (fails with `error` where valid(part) is false); *tiles:
// the blocks to launch.
template <class Valid>
ColumnGroup column_group(const MatmulGroup& group, Valid&& valid, const char* error,
                         int64_t* tiles) {
  ColumnGroup g{};
  g.count = group.count;
  g.vector_x = true;
  *tiles = 0;
  for (int p = 0; p < group.count; ++p) {
    const MatmulArgs& a = group.part[p];
    if (a.m > 16 || a.w_dtype != group.part[0].w_dtype || !valid(a)) fail_message(error);
    g.part[p] = a;
    *tiles += (a.n + kCols - 1) / kCols;
    g.tile_end[p] = *tiles;
    g.vector_x = g.vector_x && a.x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  }
  return g;
}

// Launches kernel_for(rows) over `tiles` blocks of kWarps warps, where rows is the smallest row
// tile (1, 4, 8 or 16, as a std::integral_constant) that holds m rows.
template <class KernelFor>
void launch_row_tiled(const ColumnGroup& group, int64_t m, int64_t tiles, cudaStream_t stream,
                      KernelFor&& kernel_for, const char* name) {
  using Kernel = void (*)(ColumnGroup);
  const Kernel kernel = m <= 1   ? kernel_for(std::integral_constant<int, 1>{})
                        : m <= 4 ? kernel_for(std::integral_constant<int, 4>{})
                        : m <= 8 ? kernel_for(std::integral_constant<int, 8>{})
                                 : kernel_for(std::integral_constant<int, 16>{});
  Launch launch(dim3(static_cast<unsigned>(tiles)), dim3(kWarps * 32), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, kernel, group), name);
}

// The part this block computes and its first output column *n0.
__device__ __forceinline__ const MatmulArgs& block_part(const ColumnGroup& group, int64_t* n0) {
  int p = 0;
  while (blockIdx.x >= group.tile_end[p]) ++p;
  *n0 = (blockIdx.x - (p == 0 ? 0 : group.tile_end[p - 1])) * kCols;
  return group.part[p];
}

// Sums every lane's acc over the warp (shuffle tree) and the warps (in warp order), adds the
// bias and writes (or accumulates into) y for the block's columns n0.. and rows < a.m.
template <int kMaxM>
__device__ __forceinline__ void store_columns(const float (&acc)[kCols][kMaxM],
                                              float (&partial)[kWarps][kCols][kMaxM],
                                              const MatmulArgs& a, int64_t n0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      float v = acc[c][m];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
      }
      if (lane == 0) partial[warp][c][m] = v;
    }
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < kCols * kMaxM) {
    const int c = t / kMaxM, m = t % kMaxM;
    const int64_t n = n0 + c;
    if (m < a.m && n < a.n) {
      float v = 0.0f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) v = __fadd_rn(v, partial[i][c][m]);
      if (a.bias != nullptr) v = __fadd_rn(v, load_f32(a.bias, a.bias_dtype, n));
      float* out = a.y + m * a.y_stride + n;
      *out = a.accumulate ? __fadd_rn(*out, v) : v;
    }
  }
}

}  // namespace specd::cuda::small_quant
