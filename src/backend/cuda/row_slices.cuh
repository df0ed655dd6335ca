// Long logits rows over many blocks (the argmax, temperature-only sampling): the slice sizes both
// use, and the ticket that finds a row's last block to finish.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.cuh"

namespace specd::cuda::row_slices {

constexpr int kThreads = 256;
constexpr int kCols = 4096;                   // columns a block
constexpr int kPerThread = kCols / kThreads;  // loaded at once
constexpr int kOneBlockCols = 2 * kCols;      // rows up to this long stay one block a row

inline int64_t slices(int64_t cols) { return std::max<int64_t>(1, (cols + kCols - 1) / kCols); }

// Column of this thread's element i (0..kPerThread - 1) of slice `slice` (blocks of kThreads).
__device__ __forceinline__ int column(int slice, int i) {
  return slice * kCols + i * kThreads + static_cast<int>(threadIdx.x);
}
// This thread's elements of slice `slice` of `row`, loaded at once (`fill` past `cols`).
__device__ __forceinline__ void load(const float* row, int slice, int cols, float fill,
                                     float (&v)[kPerThread]) {
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = column(slice, i);
    v[i] = c < cols ? row[c] : fill;
  }
}

// True in the last of a row's `blocks` blocks to arrive at its `ticket` (zero before; that block
// resets it for the next launch), which then sees what the others wrote before arriving. Every
// thread of the block calls it.
__device__ __forceinline__ bool last_block(unsigned* ticket, int blocks) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(ticket, 1u) == static_cast<unsigned>(blocks - 1);
    if (last) *ticket = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

}  // namespace specd::cuda::row_slices
