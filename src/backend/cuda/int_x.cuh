// x as the int8/int4 tensor-core matmul reads it: two int8 parts per 128-element block of a row,
// x ~ s (a + b / 254) with s = max|x| / 127. The layout, and the arithmetic of its writers (the
// matmul's own quantize_x_kernel, and attention's combine for the o projection), which must give
// the same bits.
#pragma once

#include <cstdint>

#include "backend/cuda/device.cuh"

namespace specd::cuda::int_x {

constexpr int kBlockK = 128;
constexpr int kXBlockBytes = 2 * kBlockK;  // the a and b parts of one block of one x row
constexpr float kLoScale = 1.0f / 254.0f;

// Where the quantised x lives: [m, n_blocks] blocks of kXBlockBytes (a then b, each in k order),
// then [m, n_blocks] float2 (s, s * sum of a + b / 254).
struct XQuant {
  int8_t* codes = nullptr;
  float2* scales = nullptr;
  int64_t n_blocks = 0;
};

__host__ __device__ inline XQuant x_quant_view(void* scratch, int64_t m, int64_t k) {
  const int64_t n_blocks = k / kBlockK;
  auto* codes = static_cast<int8_t*>(scratch);
  return {codes, reinterpret_cast<float2*>(codes + m * n_blocks * kXBlockBytes), n_blocks};
}

// 127 / max|x| of a block: 0 for a block of zeros or with a subnormal maximum (it counts as zero),
// and for a block holding a NaN or an infinity (its scale is NaN, see block_scales).
__device__ __forceinline__ float block_inverse(float amax, bool finite) {
  const float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
  return isinf(inv) ? 0.0f : inv;
}

// The two parts of one element v of a block with inverse scale `inv`.
__device__ __forceinline__ void element_parts(float v, float inv, int& a, int& b) {
  const float t = v * inv;
  const float ra = rintf(t), rb = rintf((t - ra) * 254.0f);
  a = static_cast<int>(ra);
  b = static_cast<int>(rb);
}

// A block's (s, s * (sum of a + sum of b / 254)); a NaN scale where the block is not finite, so
// the products it enters are NaN as a float product would be.
__device__ __forceinline__ float2 block_scales(float amax, bool finite, int sum_a, int sum_b) {
  const float s = finite ? amax / 127.0f : __int_as_float(0x7FC00000);
  return make_float2(s,
                     s * __fmaf_rn(static_cast<float>(sum_b), kLoScale, static_cast<float>(sum_a)));
}

}  // namespace specd::cuda::int_x
