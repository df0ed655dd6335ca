// Device helpers shared by the CUDA kernels: dtype loads and stores, weight-byte loads and exact
// code conversions of the quantised formats, dependent-launch control.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/cuda/kernels.h"

namespace specd::cuda {

__device__ __forceinline__ float load_f32(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_f32(void* p, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    case DType::kF16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

// ---- weight loads and exact small-integer conversions for the quantised formats ----

// An L2 policy for weights, which a decode step reads once: their lines are evicted first, so
// they do not push out what is read again soon (activations, the KV cache, partial sums).
__device__ __forceinline__ uint64_t weights_l2_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// A 4-byte aligned word of weights, streamed past L1.
__device__ __forceinline__ uint32_t load_word(const uint8_t* p) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// Byte e of `bytes` (0..255) as an exact float, minus `bias` (2^23 trick: no int conversion).
__device__ __forceinline__ float byte_value(uint32_t bytes, int e, float bias) {
  const float f = __int_as_float(static_cast<int>(__byte_perm(bytes, 0x4B000000u, 0x7440u | e)));
  return __fsub_rn(f, bias);
}

// The f16 in the low (upper == 0) or high half of `word`, widened.
__device__ __forceinline__ float half_value(uint32_t word, int upper) {
  const unsigned short bits = static_cast<unsigned short>(upper ? word >> 16 : word & 0xFFFF);
  return __half2float(__ushort_as_half(bits));
}

// 4 floats at p: one 16-byte load when `vector` (p 16-byte aligned), else 4 loads.
__device__ __forceinline__ void load4(const float* p, bool vector, float (&v)[4]) {
  if (vector) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = p[e];
  }
}

// The gate activations of silu_mul and gelu_tanh_mul; the fused kernels use the same functions,
// so their gated x has the same bits.
__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }
// PyTorch's order: 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 * g³))).
__device__ __forceinline__ float gelu_tanh(float g) {
  return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * (g * g * g))));
}
__device__ __forceinline__ float gated(Activation act, float gate, float up) {
  return (act == Activation::kGeluTanh ? gelu_tanh(gate) : silu(gate)) * up;
}

// RoPE of one rotate-half pair (x1 at j, x2 at j + half) with cos c and sin s, rounded the same
// way in every kernel that rotates (rope, rope_store_kv, the q/k/v matmul epilogue).
__device__ __forceinline__ float2 rotate_pair(float x1, float x2, float c, float s) {
  return make_float2(__fmaf_rn(x1, c, -__fmul_rn(x2, s)), __fmaf_rn(x2, c, __fmul_rn(x1, s)));
}

// Waits for the kernel this one depends on (programmatic dependent launch); work placed before
// the call (for example loading weights) overlaps the previous kernel's tail.
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel in the stream start its pre-wait part.
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Launch configuration with programmatic stream serialisation (a no-op before sm_90).
struct Launch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute[1];
  Launch(dim3 grid, dim3 block, size_t shared, cudaStream_t stream) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared;
    config.stream = stream;
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
};

}  // namespace specd::cuda
