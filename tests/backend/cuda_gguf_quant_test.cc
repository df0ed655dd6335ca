// The CUDA kernels of GGUF's block formats (q8_0 ... q6_k) against the double reference on the
// host-dequantised weights: small-M matmul (M = 1..16, bit-exact batch invariance, grouped
// launches), the prefill path through bf16 slabs, and embedding rows of a block-quantised table.
// Skips without a CUDA backend or GPU.
#include <gtest/gtest.h>

#include <vector>

#include "block_quant_util.h"
#include "cuda_test_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::BlockQuantWeight;
using backend_test::HostTensor;
using backend_test::kBlockQuantTypes;
using backend_test::random_block_quant;

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

using CudaGgufQuant = backend_test::CudaTest;

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
          EXPECT_LE(matmul_error(x, w.view, bias, y, accumulate),
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
    HostTensor y(DType::kF32, m, n);
    EXPECT_LE(matmul_error(x, w.view, bias, y, false), kGemmTolerance) << dtype_name(dtype);
  }
}

TEST_F(CudaGgufQuant, MatmulIsBatchInvariant) {
  for (DType dtype : kBlockQuantTypes) {
    const int64_t k = test_ks(dtype).back();
    HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(11);
    expect_batch_invariant(x, random_block_quant(dtype, 67, k, 12).view);
  }
}

TEST_F(CudaGgufQuant, GroupEqualsSeparateMatmuls) {
  for (DType dtype : kBlockQuantTypes) {
    const int64_t k = 1024;
    HostTensor x = HostTensor(DType::kF32, 5, k).random(21);
    BlockQuantWeight wq = random_block_quant(dtype, 512, k, 22),
                     wk = random_block_quant(dtype, 128, k, 23),
                     wv = random_block_quant(dtype, 130, k, 24);
    expect_group_equals_separate(x, {wq.view, wk.view, wv.view});
  }
}

// The kernels dequantise with the reference's operations: embedding rows are bit-exact.
TEST_F(CudaGgufQuant, EmbeddingDequantisesRowsExactly) {
  for (DType dtype : kBlockQuantTypes) {
    for (int64_t dim : test_ks(dtype)) {
      expect_exact_embedding(random_block_quant(dtype, 10, dim, 3).view, {9, 0, 4, 9});
    }
  }
}

}  // namespace
}  // namespace specd
