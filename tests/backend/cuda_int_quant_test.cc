// The CUDA kernels of the load-time formats (int8, int4) against the double reference: small-M
// matmul (M = 1..16, bit-exact batch invariance, grouped launches; on the tensor-core kernel and,
// with SPECD_CUDA_INT_MMA=0 set before the backend is made, on the CUDA-core one), the prefill path
// through bf16 slabs, embedding rows of a quantised table, and attention writing the x parts of
// the int8/int4 matmul that reads it. Skips without a CUDA backend or GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
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

// K = 1536: 12 blocks a row, split unevenly over a block's 8 warps (1 or 2 blocks each).
TEST_F(CudaIntQuant, MatmulMatchesReference) {
  std::vector<int64_t> ms = {17, 64, 300};
  for (int64_t m = 1; m <= kSmallBatch; ++m) ms.push_back(m);
  const std::pair<int64_t, int64_t> kn[] = {
      {128, 5}, {384, 37}, {1024, 1000}, {1536, 40}, {4096, 256}};
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

// N = 6008: blocks loop over several tiles (the next tile's first step loaded during this one's
// last) and the last group of 8 rows is half filled; K = 640 takes the CUDA-core kernel.
TEST_F(CudaIntQuant, MatmulIsBatchInvariant) {
  for (DType dtype : kFormats) {
    for (auto [k, n] :
         std::vector<std::pair<int64_t, int64_t>>{{4096, 1024}, {4096, 6008}, {640, 4099}}) {
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

// Attention told that an int8/int4 matmul reads its output next (AttentionRows::reader, head dim
// 128) writes that matmul's x parts itself: the output and the product have the bits of attention
// then the matmul's own quantisation, for 1 to 16 rows, and a matmul of another weight or other
// x right after it quantises its own x.
TEST_F(CudaIntQuant, AttentionWritesItsReadersXParts) {
  const int n_heads = 8, kv_heads = 2, head_dim = 128, capacity = 64;
  const int64_t q_dim = n_heads * head_dim, kv_dim = kv_heads * head_dim, n = 96;
  HostTensor cache = HostTensor(DType::kBF16, capacity, kv_dim).random(70, -2.0f, 2.0f);
  const Tensor kc = upload(cache), vc = upload(cache.clone().random(71, -2.0f, 2.0f));
  const KvLayerView view{kc.data, vc.data,           DType::kBF16, capacity,
                         1,       capacity * kv_dim, kv_heads,     head_dim};
  std::vector<int32_t> index(kSmallBatch), slots(kSmallBatch, 0);
  for (int i = 0; i < kSmallBatch; ++i) index[i] = 30 + 2 * i;
  for (DType dtype : kFormats) {
    const Tensor w = upload_weight(random_int_quant(dtype, n, q_dim, 72).view);
    const Tensor other = upload_weight(random_int_quant(dtype, n, q_dim, 73).view);
    for (int64_t m = 1; m <= kSmallBatch; ++m) {
      const std::string what = std::string(dtype_name(dtype)) + " M=" + std::to_string(m);
      AttentionRows rows;
      rows.count = m;
      rows.slots = upload(backend_test::i32_vector({slots.begin(), slots.begin() + m}));
      rows.cache_index = rows.positions =
          upload(backend_test::i32_vector({index.begin(), index.begin() + m}));
      const HostTensor q_host = HostTensor(DType::kF32, m, q_dim).random(74 + m, -3.0f, 3.0f);
      const Tensor q = upload(q_host);
      HostTensor out_host(DType::kF32, m, q_dim), y_host(DType::kF32, m, n);
      // Path 0: attention writes w's x parts; path 1: the matmul quantises attention's output.
      HostTensor out[2], y[2], y_other[2];
      for (int path = 0; path < 2; ++path) {
        AttentionRows r = rows;
        r.reader = path == 0 ? &w : nullptr;
        Tensor dout = upload(out_host), dy = upload(y_host), dother = upload(y_host);
        backend_->attention(q, n_heads, view, r, 0.08f, dout);
        backend_->matmul(dout, w, nullptr, dy, false);
        backend_->attention(q, n_heads, view, r, 0.08f, dout);
        backend_->matmul(dout, other, nullptr, dother, false);
        out[path] = download(dout, out_host);
        y[path] = download(dy, y_host);
        y_other[path] = download(dother, y_host);
      }
      EXPECT_TRUE(backend_test::same_tensor(out[0], out[1])) << what;
      EXPECT_TRUE(backend_test::same_tensor(y[0], y[1])) << what;
      EXPECT_TRUE(backend_test::same_tensor(y_other[0], y_other[1])) << what;
      // Other x right after attention: quantised by the matmul (the attention output is not q).
      AttentionRows r = rows;
      r.reader = &w;
      Tensor dout = upload(out_host), dy = upload(y_host);
      backend_->attention(q, n_heads, view, r, 0.08f, dout);
      backend_->matmul(q, w, nullptr, dy, false);
      HostTensor want = y_host.clone();
      reference::matmul(q_host.t(), random_int_quant(dtype, n, q_dim, 72).view, nullptr, want.t(),
                        false);
      EXPECT_LE(backend_test::max_rel_error(download(dy, y_host).t(), want.t()), kSmallTolerance)
          << what;
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
