// Large-M matmul (prefill): weight blocks widened to f32, then single-threaded OpenBLAS sgemm.
// Builds without OpenBLAS (SPECD_BLAS=OFF) use the small-M kernel for every M instead.
#include "backend/cpu/kernels.h"

#ifdef SPECD_WITH_BLAS
#include <cblas.h>

#include <algorithm>
#include <mutex>

namespace specd::cpu {

bool have_gemm() { return true; }

void gemm_init() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

namespace {
// Widened weight bytes per block: larger blocks amortise OpenBLAS's packing of x over more
// columns (measured on Zen 3: 256 KiB 112, 1 MiB 122, 4 MiB 120 GFLOP/s at M=128, K=1024).
constexpr int64_t kBlockBytes = int64_t{1} << 20;
}  // namespace

int64_t gemm_block_rows(int64_t k) {
  return std::clamp<int64_t>(kBlockBytes / (4 * std::max<int64_t>(k, 1)) / 16 * 16, 16, 1024);
}

void matmul_gemm(const MatmulArgs& a, int64_t n_begin, int64_t n_end, float* scratch) {
  const int m = static_cast<int>(a.m), k = static_cast<int>(a.k);
  const int64_t block = a.w_dtype == DType::kF32 ? n_end - n_begin : gemm_block_rows(a.k);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += block) {
    const int nb = static_cast<int>(std::min(block, n_end - n0));
    float* y = a.y + n0;
    // y = x · wᵀ + bias: bias rows first, then sgemm with beta = 1.
    // y = y + x · wᵀ (+ bias): sgemm with beta = 1, then the bias.
    float beta = 0.0f;
    if (a.accumulate) {
      beta = 1.0f;
    } else if (a.bias != nullptr) {
      const char* bias = static_cast<const char*>(a.bias) + n0 * dtype_size(a.bias_dtype);
      widen_rows(bias, a.bias_dtype, 0, 1, nb, y, 0);
      for (int i = 1; i < m; ++i) std::copy(y, y + nb, y + i * a.y_stride);
      beta = 1.0f;
    }
    const float* w;
    int ldw;
    if (a.w_dtype == DType::kF32) {
      w = static_cast<const float*>(a.w) + n0 * a.w_stride;
      ldw = static_cast<int>(std::max(a.w_stride, a.k));
    } else {
      const char* src = static_cast<const char*>(a.w) + dtype_row_bytes(a.w_dtype, n0 * a.w_stride);
      widen_rows(src, a.w_dtype, a.w_stride, nb, k, scratch, k);
      w = scratch;
      ldw = k;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nb, k, 1.0f, a.x,
                static_cast<int>(a.x_stride), w, ldw, beta, y, static_cast<int>(a.y_stride));
    if (a.accumulate && a.bias != nullptr) {
      for (int i = 0; i < m; ++i) {
        float* row = y + i * a.y_stride;
        for (int j = 0; j < nb; ++j) row[j] += load_as_f32(a.bias, a.bias_dtype, n0 + j);
      }
    }
  }
}

}  // namespace specd::cpu

#else
#include "core/error.h"

namespace specd::cpu {
bool have_gemm() { return false; }
void gemm_init() {}
int64_t gemm_block_rows(int64_t) { return 16; }
void matmul_gemm(const MatmulArgs&, int64_t, int64_t, float*) {
  fail("this build has no OpenBLAS GEMM");
}
}  // namespace specd::cpu
#endif
