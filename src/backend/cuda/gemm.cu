// Prefill GEMM: y = x · wᵀ (+ bias, + y) with bf16 tensor cores (mma.m16n8k16, ldmatrix,
// cp.async three-stage pipeline); x is first rounded to a bf16 copy. Also the rounding and bias
// kernels the cuBLASLt GEMM (cublaslt_gemm.cc) shares.
#include <algorithm>

#include "backend/cuda/device.cuh"

namespace specd::cuda {
namespace {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32;
constexpr int kStages = 3;
constexpr int kPitch = kBlockK + 8;  // bf16 per shared row: 80 bytes, no ldmatrix bank conflicts
constexpr int kThreads = 256;        // 8 warps: 2 along M x 4 along N, 64 x 32 outputs each
constexpr size_t kStageElems = static_cast<size_t>(kBlockM + kBlockN) * kPitch;
constexpr size_t kSharedBytes = kStages * kStageElems * sizeof(__nv_bfloat16);

__global__ void to_bf16_kernel(const float* x, int64_t stride, int64_t rows, int64_t cols,
                               __nv_bfloat16* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = __float2bfloat16_rn(x[r * stride + c]);
  }
}

__device__ __forceinline__ void cp_async16(void* shared, const void* global, bool valid) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const int bytes = valid ? 16 : 0;  // 0: fill with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(global), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* shared) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x: [M, K] bf16 contiguous; w: [N, K] bf16 (row stride w_stride); K % 8 == 0.
__global__ void __launch_bounds__(kThreads) gemm_kernel(MatmulArgs a, const __nv_bfloat16* x) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto* shared = reinterpret_cast<__nv_bfloat16*>(shared_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kBlockM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBlockN;
  const auto* w = static_cast<const __nv_bfloat16*>(a.w);
  const int64_t k_tiles = (a.k + kBlockK - 1) / kBlockK;

  // Each thread copies two 16-byte pieces of the x tile and two of the w tile per stage.
  auto load_stage = [&](int stage, int64_t kt) {
    __nv_bfloat16* sx = shared + stage * kStageElems;
    __nv_bfloat16* sw = sx + kBlockM * kPitch;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int piece = tid + i * kThreads;  // 512 pieces: 128 rows x 4
      const int r = piece / 4, kc = (piece % 4) * 8;
      const int64_t k = kt * kBlockK + kc;
      const int64_t xm = m0 + r, wn = n0 + r;
      const bool kx = k < a.k;
      cp_async16(sx + r * kPitch + kc, x + std::min(xm, a.m - 1) * a.k + (kx ? k : 0),
                 kx && xm < a.m);
      cp_async16(sw + r * kPitch + kc, w + std::min(wn, a.n - 1) * a.w_stride + (kx ? k : 0),
                 kx && wn < a.n);
    }
  };

  wait_for_inputs();
  allow_next_kernel();
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  const int wm = warp / 4, wn = warp % 4;  // warp tile: rows wm*64, cols wn*32
  float acc[4][4][4] = {};
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int64_t next = kt + kStages - 1;
    if (next < k_tiles) load_stage(static_cast<int>(next % kStages), next);
    cp_async_commit();

    const __nv_bfloat16* sx = shared + (kt % kStages) * kStageElems;
    const __nv_bfloat16* sw = sx + kBlockM * kPitch;
#pragma unroll
    for (int ks = 0; ks < kBlockK; ks += 16) {
      uint32_t af[4][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = wm * 64 + i * 16 + (lane % 16);
        ldmatrix_x4(af[i], sx + r * kPitch + ks + (lane / 16) * 8);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int r = wn * 32 + j * 16 + (lane % 8) + (lane / 16) * 8;
        ldmatrix_x4(bf[j], sw + r * kPitch + ks + ((lane / 8) % 2) * 8);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
      }
    }
  }
  cp_async_wait<0>();

  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = m0 + wm * 64 + i * 16 + g + (e >= 2 ? 8 : 0);
        const int64_t col = n0 + wn * 32 + j * 8 + 2 * c + (e & 1);
        if (row >= a.m || col >= a.n) continue;
        float v = acc[i][j][e];
        if (a.bias != nullptr) v += load_f32(a.bias, a.bias_dtype, col);
        float* out = a.y + row * a.y_stride + col;
        *out = a.accumulate ? *out + v : v;
      }
    }
  }
}

__global__ void add_bias_kernel(float* y, int64_t y_stride, int64_t rows, int64_t cols,
                                const void* bias, DType bias_dtype) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    y[r * y_stride + c] += load_f32(bias, bias_dtype, c);
  }
}

}  // namespace

bool gemm_supported(const MatmulArgs& a) {
  return a.w_dtype == DType::kBF16 && a.k % 8 == 0 && a.w_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
}

void round_x_bf16(const MatmulArgs& a, const MatmulScratch& scratch, cudaStream_t stream) {
  const int64_t elems = a.m * a.k;
  if (static_cast<size_t>(elems) > scratch.x_bf16_elems)
    fail_message("cuda gemm: scratch too small");
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((elems + 255) / 256, 4096));
  Launch launch(dim3(blocks), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, to_bf16_kernel, a.x, a.x_stride, a.m, a.k,
                           static_cast<__nv_bfloat16*>(scratch.x_bf16)),
        "to_bf16_kernel");
}

void add_bias(const MatmulArgs& a, cudaStream_t stream) {
  const int64_t elems = a.m * a.n;
  if (a.bias == nullptr || elems == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((elems + 255) / 256, 4096));
  Launch launch(dim3(blocks), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, add_bias_kernel, a.y, a.y_stride, a.m, a.n, a.bias,
                           a.bias_dtype),
        "add_bias_kernel");
}

void matmul_gemm(const MatmulArgs& a, const MatmulScratch& scratch, cudaStream_t stream) {
  round_x_bf16(a, scratch, stream);
  static bool configured = false;
  if (!configured) {
    check(cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kSharedBytes)),
          "cudaFuncSetAttribute(gemm_kernel)");
    configured = true;
  }
  const dim3 grid(static_cast<unsigned>((a.n + kBlockN - 1) / kBlockN),
                  static_cast<unsigned>((a.m + kBlockM - 1) / kBlockM));
  Launch launch(grid, dim3(kThreads), kSharedBytes, stream);
  check(cudaLaunchKernelEx(&launch.config, gemm_kernel, a,
                           static_cast<const __nv_bfloat16*>(scratch.x_bf16)),
        "gemm_kernel");
}

}  // namespace specd::cuda
