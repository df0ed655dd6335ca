// Device-side token choice: the argmax of each logits row (greedy decoding and verification).
#include <climits>

#include "backend/cuda/device.cuh"

namespace specd::cuda {
namespace {

constexpr int kThreads = 1024;

// True if logit (va at column ia) is chosen over (vb at ib) by a sequential scan that keeps the
// first maximum under `>`: larger first, then the lower column; a NaN wins only in column 0 and
// loses to any number elsewhere. A strict total order, so any reduction order gives one winner.
__device__ __forceinline__ bool better(float va, int ia, float vb, int ib) {
  const bool a_nan = isnan(va), b_nan = isnan(vb);
  if (a_nan || b_nan) {
    if (a_nan && ia == 0) return true;
    if (b_nan && ib == 0) return false;
    if (a_nan != b_nan) return b_nan;
    return ia < ib;
  }
  if (va != vb) return va > vb;
  return ia < ib;
}

// One block per row: strided per-thread scans, then a shuffle and a shared-memory reduction.
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* logits, int64_t stride, int cols, int32_t* ids) {
  __shared__ float warp_v[kThreads / 32];
  __shared__ int warp_i[kThreads / 32];
  wait_for_inputs();
  allow_next_kernel();
  const float* row = logits + blockIdx.x * stride;
  float v = 0.0f;
  int idx = INT_MAX;  // INT_MAX: nothing seen yet
#pragma unroll 4
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float x = row[c];
    if (idx == INT_MAX || better(x, c, v, idx)) v = x, idx = c;
  }
  auto take = [&](float ov, int oi) {
    if (oi != INT_MAX && (idx == INT_MAX || better(ov, oi, v, idx))) v = ov, idx = oi;
  };
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, offset);
    take(ov, oi);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_v[warp] = v;
    warp_i[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    v = warp_v[lane];
    idx = warp_i[lane];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, offset);
      take(ov, oi);
    }
    if (lane == 0) ids[blockIdx.x] = idx;
  }
}

}  // namespace

void argmax_rows(const float* logits, int64_t stride, int64_t rows, int64_t cols, int32_t* ids,
                 cudaStream_t stream) {
  if (cols > INT_MAX - kThreads) fail_message("cuda argmax: a row longer than INT_MAX");
  Launch launch(dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, argmax_kernel, logits, stride, static_cast<int>(cols),
                           ids),
        "argmax_kernel");
}

}  // namespace specd::cuda
