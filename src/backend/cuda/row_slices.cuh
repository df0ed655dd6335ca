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
