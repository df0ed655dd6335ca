// The CUDA kernels of the load-time formats (int8, int4) against the double reference: small-M
// matmul (M = 1..16, bit-exact batch invariance, grouped launches), the prefill path through
// bf16 slabs, and embedding rows of a quantised table. Skips without a CUDA backend or GPU.
#include <gtest/gtest.h>

#include <vector>

#include "backend/reference.h"
#include "cuda_test_util.h"
#include "int_quant_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::IntQuantWeight;
using backend_test::max_rel_error;
using backend_test::random_int_quant;
using backend_test::same_bits;

// The small-M kernel dequantises exactly and accumulates in f32; the prefill GEMM rounds the
// dequantised weights and x to bf16.
constexpr double kSmallTolerance = 1e-5;
constexpr double kGemmTolerance = 1e-2;

const DType kFormats[] = {DType::kInt8, DType::kInt4};

class CudaIntQuant : public backend_test::CudaTest {
 protected:
  Tensor upload(const HostTensor& host) { return CudaTest::upload(host); }
  Tensor upload(const IntQuantWeight& w) { return upload_weight(w.view); }
};

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

TEST_F(CudaIntQuant, MatmulIsBatchInvariant) {
  for (DType dtype : kFormats) {
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{{4096, 1024}, {640, 4099}}) {
      HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(11);
      IntQuantWeight w = random_int_quant(dtype, n, k, 12);
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
}

TEST_F(CudaIntQuant, GroupEqualsSeparateMatmuls) {
  for (DType dtype : kFormats) {
    const int64_t k = 1024;
    HostTensor x = HostTensor(DType::kF32, 5, k).random(21);
    IntQuantWeight wq = random_int_quant(dtype, 512, k, 22),
                   wk = random_int_quant(dtype, 128, k, 23),
                   wv = random_int_quant(dtype, 130, k, 24);
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
      for (int64_t r = 0; r < 5; ++r)
        EXPECT_TRUE(same_bits(a.t(), r, b.t(), r)) << dtype_name(dtype);
    }
  }
}

TEST_F(CudaIntQuant, EmbeddingDequantisesRowsExactly) {
  for (DType dtype : kFormats) {
    IntQuantWeight table = random_int_quant(dtype, 10, 384, 3);
    HostTensor ids = backend_test::i32_vector({9, 0, 4});
    HostTensor got(DType::kF32, 3, 384), want(DType::kF32, 3, 384);
    Tensor dt = upload(table), di = upload(ids), dout = upload(got);
    backend_->embedding(di, dt, dout);
    HostTensor host = download(dout, got);
    reference::embedding(ids.t(), table.view, want.t());
    EXPECT_EQ(max_rel_error(host.t(), want.t()), 0.0) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace specd
