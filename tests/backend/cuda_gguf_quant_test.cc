// The CUDA kernels of GGUF's block formats (q8_0 ... q6_k) against the double reference on the
// host-dequantised weights: small-M matmul (M = 1..16, bit-exact batch invariance, grouped
// launches), the prefill path through bf16 slabs, and embedding rows of a block-quantised table.
// Skips without a CUDA backend or GPU.
#include <gtest/gtest.h>

#include <tuple>
#include <utility>
#include <vector>

#include "backend/reference.h"
#include "block_quant_util.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::BlockQuantWeight;
using backend_test::HostTensor;
using backend_test::kBlockQuantTypes;
using backend_test::max_rel_error;
using backend_test::random_block_quant;
using backend_test::same_bits;

// The small-M kernel dequantises exactly and accumulates in f32; the prefill GEMM rounds the
// dequantised weights and x to bf16.
constexpr double kSmallTolerance = 1e-5;
constexpr double kGemmTolerance = 1e-2;

// K values of a format: one chunk of 256, several, and (for 32-element blocks) a row that ends
// inside a chunk.
std::vector<int64_t> test_ks(DType dtype) {
  if (dtype_block_elems(dtype) == 32) return {96, 1024, 1120};
  return {256, 1024, 2304};
}

class CudaGgufQuant : public backend_test::CudaTest {
 protected:
  Tensor upload(const HostTensor& host) { return CudaTest::upload(host); }
  Tensor upload(const BlockQuantWeight& w) { return upload_weight(w.view); }
};

TEST_F(CudaGgufQuant, MatmulMatchesReference) {
  const int64_t ms[] = {1, 2, 5, 9, 16, 17, 64};
  const int64_t ns[] = {37, 300};
  uint32_t seed = 5;
  for (DType dtype : kBlockQuantTypes) {
    for (int64_t m : ms) {
      for (int64_t k : test_ks(dtype)) {
        for (int64_t n : ns) {
          seed += 7;
          const bool accumulate = (seed & 8) != 0;
          HostTensor x = HostTensor(DType::kF32, m, k).random(seed);
          BlockQuantWeight w = random_block_quant(dtype, n, k, seed + 1);
          HostTensor bias = HostTensor(DType::kBF16, 1, n).random(seed + 2);
          HostTensor y = HostTensor(DType::kF32, m, n).random(seed + 3);
          HostTensor want = y.clone();
          Tensor dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y);
          backend_->matmul(dx, dw, &db, dy, accumulate);
          HostTensor got = download(dy, y);
          reference::matmul(x.t(), w.view, &bias.t(), want.t(), accumulate);
          EXPECT_LE(max_rel_error(got.t(), want.t()),
                    m > kSmallBatch ? kGemmTolerance : kSmallTolerance)
              << dtype_name(dtype) << " M=" << m << " K=" << k << " N=" << n
              << " accumulate=" << accumulate;
        }
      }
    }
  }
}

// Several slabs of the prefill path (the slab size depends on K only), with a bias.
TEST_F(CudaGgufQuant, PrefillSpansSlabs) {
  for (DType dtype : {DType::kQ4_0, DType::kQ6_K}) {
    const int64_t m = 17, k = 65536, n = 600;  // 512-row slabs at this K
    HostTensor x = HostTensor(DType::kF32, m, k).random(31);
    BlockQuantWeight w = random_block_quant(dtype, n, k, 32);
    HostTensor bias = HostTensor(DType::kF32, 1, n).random(33);
    HostTensor y(DType::kF32, m, n), want(DType::kF32, m, n);
    Tensor dx = upload(x), dw = upload(w), db = upload(bias), dy = upload(y);
    backend_->matmul(dx, dw, &db, dy, false);
    HostTensor got = download(dy, y);
    reference::matmul(x.t(), w.view, &bias.t(), want.t(), false);
    EXPECT_LE(max_rel_error(got.t(), want.t()), kGemmTolerance) << dtype_name(dtype);
  }
}

TEST_F(CudaGgufQuant, MatmulIsBatchInvariant) {
  for (DType dtype : kBlockQuantTypes) {
    const int64_t k = test_ks(dtype).back(), n = 67;
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(11);
    BlockQuantWeight w = random_block_quant(dtype, n, k, 12);
    Tensor dx = upload(x), dw = upload(w);
    HostTensor alone(DType::kF32, kSmallBatch, n);
    Tensor dalone = upload(alone);
    for (int64_t r = 0; r < kSmallBatch; ++r) {
      Tensor yr = dalone.slice_rows(r, 1);
      backend_->matmul(dx.slice_rows(r, 1), dw, nullptr, yr, false);
    }
    HostTensor single = download(dalone, alone);
    for (int64_t m = 1; m <= kSmallBatch; ++m) {
      HostTensor y(DType::kF32, m, n);
      Tensor dy = upload(y);
      backend_->matmul(dx.slice_rows(0, m), dw, nullptr, dy, false);
      HostTensor got = download(dy, y);
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_TRUE(same_bits(got.t(), r, single.t(), r))
            << dtype_name(dtype) << " K=" << k << " M=" << m << " row " << r;
      }
    }
  }
}

TEST_F(CudaGgufQuant, GroupEqualsSeparateMatmuls) {
  for (DType dtype : kBlockQuantTypes) {
    const int64_t k = 1024;
    HostTensor x = HostTensor(DType::kF32, 5, k).random(21);
    BlockQuantWeight wq = random_block_quant(dtype, 512, k, 22),
                     wk = random_block_quant(dtype, 128, k, 23),
                     wv = random_block_quant(dtype, 130, k, 24);
    Tensor dx = upload(x), dq = upload(wq), dk = upload(wk), dv = upload(wv);
    HostTensor yq(DType::kF32, 5, 512), yk(DType::kF32, 5, 128), yv(DType::kF32, 5, 130);
    Tensor gq = upload(yq), gk = upload(yk), gv = upload(yv);
    Tensor sq = upload(yq), sk = upload(yk), sv = upload(yv);
    const MatmulPart parts[] = {{&dq, nullptr, &gq}, {&dk, nullptr, &gk}, {&dv, nullptr, &gv}};
    backend_->matmul_group(dx, parts);
    backend_->matmul(dx, dq, nullptr, sq, false);
    backend_->matmul(dx, dk, nullptr, sk, false);
    backend_->matmul(dx, dv, nullptr, sv, false);
    for (auto [g, s, like] :
         {std::tuple{gq, sq, &yq}, std::tuple{gk, sk, &yk}, std::tuple{gv, sv, &yv}}) {
      HostTensor a = download(g, *like), b = download(s, *like);
      for (int64_t r = 0; r < 5; ++r) {
        EXPECT_TRUE(same_bits(a.t(), r, b.t(), r)) << dtype_name(dtype);
      }
    }
  }
}

// The kernels dequantise with the reference's operations: embedding rows are bit-exact.
TEST_F(CudaGgufQuant, EmbeddingDequantisesRowsExactly) {
  for (DType dtype : kBlockQuantTypes) {
    for (int64_t dim : test_ks(dtype)) {
      BlockQuantWeight table = random_block_quant(dtype, 10, dim, 3);
      HostTensor ids = backend_test::i32_vector({9, 0, 4, 9});
      HostTensor got(DType::kF32, 4, dim), want(DType::kF32, 4, dim);
      Tensor dt = upload(table), di = upload(ids), dout = upload(got);
      backend_->embedding(di, dt, dout);
      HostTensor host = download(dout, got);
      reference::embedding(ids.t(), table.view, want.t());
      EXPECT_EQ(max_rel_error(host.t(), want.t()), 0.0) << dtype_name(dtype) << " D=" << dim;
    }
  }
}

}  // namespace
}  // namespace specd
