// Block-quantised weights: the dequantisation reference against gguf-py's golden values, and the
// CPU matmul on blocks against the double reference, including batch invariance for M <= 16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/quant_ref.h"
#include "backend/reference.h"
#include "block_quant_util.h"
#include "core/error.h"
#include "core/npy.h"
#include "io/gguf.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::BlockQuantWeight;
using backend_test::HostTensor;
using backend_test::kBlockQuantTypes;
using backend_test::max_rel_error;
using backend_test::random_block_quant;
using backend_test::same_bits;

CpuBackend& backend() {
  static CpuBackend instance(2);
  return instance;
}

std::string data_dir() { return std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/"; }

TEST(QuantFormats, BlockSizes) {
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ6_K, 512), 420u);
  EXPECT_EQ(dtype_row_bytes(DType::kF16, 3), 6u);
  EXPECT_THROW(dtype_row_bytes(DType::kQ8_0, 48), Error);
  EXPECT_THROW(dtype_size(DType::kQ4_K), Error);
  EXPECT_TRUE(is_quantized(DType::kQ5_1));
  EXPECT_FALSE(is_quantized(DType::kBF16));
}

// Golden values: tools/gguf/make_quant_fixtures.py dequantised each tensor with gguf-py.
TEST(QuantFormats, DequantizeMatchesGgufPy) {
  GgufFile file(data_dir() + "formats.gguf");
  const char* names[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q4_1",
                         "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};
  for (const char* name : names) {
    const GgufTensorInfo* t = file.header().find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    auto dtype = ggml_type_to_dtype(t->ggml_type);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(dtype_name(*dtype), name);
    NpyArray want = read_npy_f32(data_dir() + "dequant_" + name + ".npy");
    ASSERT_EQ(want.shape.size(), 2u);
    const int64_t rows = want.shape[0], cols = want.shape[1];
    ASSERT_EQ(t->dims, (std::vector<uint64_t>{uint64_t(cols), uint64_t(rows)})) << name;
    std::vector<float> got(static_cast<size_t>(cols));
    size_t mismatches = 0;
    float worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(*dtype, t->data + r * dtype_row_bytes(*dtype, cols), cols, got.data());
      for (int64_t c = 0; c < cols; ++c) {
        float w = want.data[static_cast<size_t>(r * cols + c)];
        float err = std::abs(got[static_cast<size_t>(c)] - w);
        // gguf-py evaluates some products in another order: allow one rounding step.
        if (err > 2e-7f * std::max(1.0f, std::abs(w))) ++mismatches;
        worst = std::max(worst, err);
      }
    }
    EXPECT_EQ(mismatches, 0u) << name << " worst abs error " << worst;
  }
}

// The word-parallel unpacking of a q4_k/q5_k block's 12 scale bytes equals the per-sub-block
// one that follows ggml's dequantisation, on every value of each byte position.
TEST(QuantFormats, KQuantScalesMinsUnpackAsPerSubBlock) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 4096; ++trial) {
    uint8_t q[12];
    for (int i = 0; i < 12; ++i) q[i] = static_cast<uint8_t>(trial < 256 ? trial : rng());
    uint8_t both[16];
    k_quant_scales_mins(q, both);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      k_quant_scale_min(j, q, &sc, &mn);
      ASSERT_EQ(both[j], sc) << "trial " << trial << " sub-block " << j;
      ASSERT_EQ(both[8 + j], mn) << "trial " << trial << " sub-block " << j;
    }
  }
}

TEST(QuantMatmul, MatchesReference) {
  const int64_t ms[] = {1, 2, 3, 5, 16, 17, 64, 65, 130};
  uint32_t seed = 7;
  for (DType dtype : kBlockQuantTypes) {
    const int64_t block = dtype_block_elems(dtype);
    const int64_t ks[] = {block == 32 ? 96 : 256, 512, block == 32 ? 576 : 768};
    for (int64_t m : ms) {
      for (int64_t k : ks) {
        const int64_t n = 37;
        seed += 3;
        HostTensor x = HostTensor(DType::kF32, m, k).random(seed);
        BlockQuantWeight w = random_block_quant(dtype, n, k, seed + 1);
        HostTensor bias = HostTensor(DType::kF32, 1, n).random(seed + 2);
        // x is rounded to int16 per 32-element group: measured up to 2.8e-5 here.
        EXPECT_LE(backend_test::matmul_rel_error(backend(), x.t(), w.view, &bias.t(), seed + 3,
                                                 (seed & 1) != 0),
                  1e-4)
            << dtype_name(dtype) << " M=" << m << " K=" << k;
      }
    }
  }
}

TEST(QuantMatmul, BatchInvariantUpTo16Rows) {
  for (DType dtype : kBlockQuantTypes) {
    const int64_t k = 512, n = 45;
    BlockQuantWeight w = random_block_quant(dtype, n, k, 99);
    HostTensor x = HostTensor(DType::kF32, 16, k).random(5);
    backend_test::expect_matmul_batch_invariant(backend(), x.t(), w.view, nullptr,
                                                HostTensor(DType::kF32, 16, n), false);
  }
}

// x is rounded to int16 per group: a non-finite element must still make its row's products NaN
// (as the f32 product would be non-finite), an all-zero row gives exact zeros, and neither
// disturbs the other rows.
TEST(QuantMatmul, NonFiniteAndZeroActivations) {
  for (DType dtype : kBlockQuantTypes) {
    const int64_t k = 512, n = 9;
    BlockQuantWeight w = random_block_quant(dtype, n, k, 11);
    HostTensor x = HostTensor(DType::kF32, 4, k).random(12);
    float* xs = x.t().ptr<float>();
    xs[0 * k + 40] = std::numeric_limits<float>::infinity();
    xs[1 * k + 300] = std::numeric_limits<float>::quiet_NaN();
    std::fill(xs + 2 * k, xs + 3 * k, 0.0f);
    HostTensor y(DType::kF32, 4, n), alone(DType::kF32, 1, n);
    backend().matmul(x.t(), w.view, nullptr, y.t(), false);
    backend().matmul(x.t().slice_rows(3, 1), w.view, nullptr, alone.t(), false);
    const float* ys = y.t().ptr<const float>();
    for (int64_t c = 0; c < n; ++c) {
      EXPECT_TRUE(std::isnan(ys[0 * n + c])) << dtype_name(dtype) << " column " << c;
      EXPECT_TRUE(std::isnan(ys[1 * n + c])) << dtype_name(dtype) << " column " << c;
      EXPECT_EQ(ys[2 * n + c], 0.0f) << dtype_name(dtype) << " column " << c;
    }
    EXPECT_TRUE(same_bits(y.t(), 3, alone.t(), 0)) << dtype_name(dtype);
  }
}

TEST(QuantMatmul, EmbeddingDequantisesRows) {
  for (DType dtype : kBlockQuantTypes) {
    BlockQuantWeight table = random_block_quant(dtype, 10, 256, 3);
    HostTensor ids = backend_test::i32_vector({9, 0, 4});
    HostTensor got(DType::kF32, 3, 256), want(DType::kF32, 3, 256);
    backend().embedding(ids.t(), table.view, got.t());
    reference::embedding(ids.t(), table.view, want.t());
    EXPECT_EQ(max_rel_error(got.t(), want.t()), 0.0) << dtype_name(dtype);
  }
}

TEST(QuantMatmul, RejectsPartialBlocks) {
  BlockQuantWeight w = random_block_quant(DType::kQ4_0, 4, 64, 1);
  Tensor bad = w.view;
  bad.cols = 48;
  bad.stride = 64;
  HostTensor x(DType::kF32, 1, 48), y(DType::kF32, 1, 4);
  EXPECT_THROW(backend().matmul(x.t(), bad, nullptr, y.t(), false), Error);
}

}  // namespace
}  // namespace specd
