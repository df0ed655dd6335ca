// The CUDA kernels of the load-time formats (int8, int4) against the double reference: small-M
// matmul (M = 1..16, bit-exact batch invariance, grouped launches; on the tensor-core kernel and,
// with SPECD_CUDA_INT_MMA=0 set before the backend is made, on the CUDA-core one), the prefill path
// through bf16 slabs, and embedding rows of a quantised table. Skips without a CUDA backend or GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "int_quant_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::IntQuantWeight;
using backend_test::random_int_quant;

// The small-M kernels run on integer tensor cores with x as two int8 parts per block (about the
// bf16 kernel's error); the CUDA-core kernel dequantises exactly and accumulates in f32; the
// prefill GEMM rounds the dequantised weights and x to bf16.
constexpr double kSmallTolerance = 2e-4;
constexpr double kCudaCoreTolerance = 1e-5;
constexpr double kGemmTolerance = 1e-2;

const DType kFormats[] = {DType::kInt8, DType::kInt4};

using CudaIntQuant = backend_test::CudaTest;

TEST_F(CudaIntQuant, MatmulMatchesReference) {
  std::vector<int64_t> ms = {17, 64, 300};
  for (int64_t m = 1; m <= kSmallBatch; ++m) ms.push_back(m);
  const std::pair<int64_t, int64_t> kn[] = {{128, 5}, {384, 37}, {1024, 1000}, {4096, 256}};
  uint32_t seed = 3;
  for (DType dtype : kFormats) {
    for (int64_t m : ms) {
      for (auto [k, n] : kn) {
        for (bool accumulate : {false, true}) {
          seed += 7;
          HostTensor x = HostTensor(DType::kF32, m, k).random(seed);
          IntQuantWeight w = random_int_quant(dtype, n, k, seed + 1);
          HostTensor bias = HostTensor(DType::kBF16, 1, n).random(seed + 2);
          HostTensor y = HostTensor(DType::kF32, m, n).random(seed + 3);
          EXPECT_LE(matmul_error(x, w.view, bias, y, accumulate),
                    m > kSmallBatch ? kGemmTolerance : kSmallTolerance)
              << dtype_name(dtype) << " M=" << m << " K=" << k << " N=" << n
              << " accumulate=" << accumulate;
        }
      }
    }
  }
}

TEST_F(CudaIntQuant, MatmulIsBatchInvariant) {
  for (DType dtype : kFormats) {
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{4096, 1024}, {640, 4099}}) {
      HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(11);
      expect_batch_invariant(x, random_int_quant(dtype, n, k, 12).view);
    }
  }
}

// The down projection's x quantisation applies the activation itself (K = 1024), or silu_mul
// runs first (K = 384: rows off the tensor-core alignment).
TEST_F(CudaIntQuant, GatedMatmulEqualsGateThenMatmul) {
  for (DType dtype : kFormats) {
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1024, 96}, {384, 37}}) {
      expect_gated_equals_separate(random_int_quant(dtype, n, k, 62).view);
    }
  }
}

// x is quantised per 128-element block: a NaN or an infinity must not vanish into a finite
// scale. The rows holding one give non-finite outputs; the other rows are unaffected.
TEST_F(CudaIntQuant, NonFiniteInputsStayNonFinite) {
  for (DType dtype : kFormats) {
    const int64_t k = 1024, n = 64;
    HostTensor x = HostTensor(DType::kF32, 3, k).random(61);
    x.set(0, 300, NAN);
    x.set(1, 5, INFINITY);
    IntQuantWeight w = random_int_quant(dtype, n, k, 62);
    HostTensor y(DType::kF32, 3, n);
    Tensor dx = upload(x), dw = upload_weight(w.view), dy = upload(y);
    backend_->matmul(dx, dw, nullptr, dy, false);
    HostTensor got = download(dy, y);
    HostTensor want = y.clone();
    reference::matmul(x.t(), w.view, nullptr, want.t(), false);
    for (int64_t c = 0; c < n; ++c) {
      EXPECT_FALSE(std::isfinite(got.at(0, c))) << dtype_name(dtype) << " column " << c;
      EXPECT_FALSE(std::isfinite(got.at(1, c))) << dtype_name(dtype) << " column " << c;
      EXPECT_NEAR(got.at(2, c), want.at(2, c), 1e-3) << dtype_name(dtype) << " column " << c;
    }
  }
}

// The CUDA-core kernel (SPECD_CUDA_INT_MMA=0; it also serves x that is not 16-byte aligned):
// exact dequantisation, f32 sums, batch-invariant.
TEST_F(CudaIntQuant, CudaCoreKernelMatchesReference) {
  setenv("SPECD_CUDA_INT_MMA", "0", 1);
  backend_ = make_backend(Device{DeviceKind::kCuda, 0}, 1);
  unsetenv("SPECD_CUDA_INT_MMA");
  uint32_t seed = 40;
  for (DType dtype : kFormats) {
    for (int64_t m : {1, 5, 16}) {
      HostTensor x = HostTensor(DType::kF32, m, 1024).random(seed += 4);
      IntQuantWeight w = random_int_quant(dtype, 300, 1024, seed + 1);
      HostTensor bias = HostTensor(DType::kBF16, 1, 300).random(seed + 2);
      HostTensor y = HostTensor(DType::kF32, m, 300).random(seed + 3);
      EXPECT_LE(matmul_error(x, w.view, bias, y, false), kCudaCoreTolerance)
          << dtype_name(dtype) << " M=" << m;
    }
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, 640).random(51);
    expect_batch_invariant(x, random_int_quant(dtype, 4099, 640, 52).view);
  }
}

TEST_F(CudaIntQuant, GroupEqualsSeparateMatmuls) {
  for (DType dtype : kFormats) {
    const int64_t k = 1024;
    HostTensor x = HostTensor(DType::kF32, 5, k).random(21);
    IntQuantWeight wq = random_int_quant(dtype, 512, k, 22),
                   wk = random_int_quant(dtype, 128, k, 23),
                   wv = random_int_quant(dtype, 130, k, 24);
    expect_group_equals_separate(x, {wq.view, wk.view, wv.view});
  }
}

TEST_F(CudaIntQuant, EmbeddingDequantisesRowsExactly) {
  for (DType dtype : kFormats) {
    expect_exact_embedding(random_int_quant(dtype, 10, 384, 3).view, {9, 0, 4});
  }
}

}  // namespace
}  // namespace specd
