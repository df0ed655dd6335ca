// Load-time quantisation (--quantize int8|int4): the quantisers against numpy golden data
// (tools/quant/make_quant_fixtures.py), round-trip error bounds, and the CPU small-M matmul on
// the int8/int4 blocks against the double reference, bit-exact batch invariance for M <= 16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/quant_ref.h"
#include "backend/quantize.h"
#include "backend/reference.h"
#include "core/error.h"
#include "core/npy.h"
#include "int_quant_util.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::IntQuantWeight;
using backend_test::max_rel_error;
using backend_test::random_int_quant;
using backend_test::same_bits;

const DType kFormats[] = {DType::kInt8, DType::kInt4};

CpuBackend& backend() {
  static CpuBackend instance(2);
  return instance;
}

NpyArray fixture(const std::string& name) {
  return read_npy_f32(std::string(SPECD_SOURCE_DIR) + "/tests/data/quant/" + name + ".npy");
}

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

// The numpy weights as a bf16 tensor (they are bf16 values), quantised by specd.
std::vector<uint8_t> quantize_fixture(DType dtype, const NpyArray& w) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  std::vector<uint16_t> bf16(w.data.size());
  for (size_t i = 0; i < bf16.size(); ++i) {
    bf16[i] = f32_to_bf16(w.data[i]);
    EXPECT_EQ(bf16_to_f32(bf16[i]), w.data[i]) << "fixture value " << i << " is not bf16";
  }
  std::vector<uint8_t> out(static_cast<size_t>(rows) * dtype_row_bytes(dtype, cols));
  quantize_rows(dtype, bf16.data(), DType::kBF16, rows, cols, out.data());
  return out;
}

TEST(IntQuantFormats, BlockSizes) {
  EXPECT_EQ(dtype_block_elems(DType::kInt8), 128);
  EXPECT_EQ(dtype_block_elems(DType::kInt4), 128);
  EXPECT_EQ(dtype_row_bytes(DType::kInt8, 256), 264u);  // 2 x (f32 + 128 x i8)
  EXPECT_EQ(dtype_row_bytes(DType::kInt4, 384), 204u);  // 3 x (2 x f16 + 64 bytes)
  EXPECT_THROW(dtype_row_bytes(DType::kInt4, 192), Error);
  EXPECT_TRUE(is_quantized(DType::kInt8));
  EXPECT_EQ(parse_weight_quant("int4"), WeightQuant::kInt4);
  EXPECT_THROW(parse_weight_quant("int3"), Error);
  EXPECT_TRUE(can_quantize(DType::kBF16, 384));
  EXPECT_FALSE(can_quantize(DType::kBF16, 192));
  EXPECT_FALSE(can_quantize(DType::kQ8_0, 256));
}

TEST(IntQuantFormats, Int8MatchesNumpy) {
  NpyArray w = fixture("weights"), codes = fixture("int8_codes"), scales = fixture("int8_scales");
  NpyArray dequant = fixture("int8_dequant");
  const int64_t rows = w.shape[0], cols = w.shape[1], blocks = cols / 128;
  std::vector<uint8_t> q = quantize_fixture(DType::kInt8, w);
  std::vector<float> y(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = q.data() + r * dtype_row_bytes(DType::kInt8, cols);
    for (int64_t b = 0; b < blocks; ++b) {
      float d;
      std::memcpy(&d, row + b * 132, 4);
      EXPECT_EQ(d, scales.data[static_cast<size_t>(r)]) << "row " << r << " block " << b;
      for (int j = 0; j < 128; ++j) {
        const size_t i = static_cast<size_t>(r * cols + b * 128 + j);
        ASSERT_EQ(static_cast<float>(static_cast<int8_t>(row[b * 132 + 4 + j])), codes.data[i])
            << "row " << r << " element " << b * 128 + j;
      }
    }
    dequantize_row(DType::kInt8, row, cols, y.data());
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(y[static_cast<size_t>(c)], dequant.data[static_cast<size_t>(r * cols + c)]);
    }
  }
}

TEST(IntQuantFormats, Int4MatchesNumpy) {
  NpyArray w = fixture("weights"), codes = fixture("int4_codes"), scales = fixture("int4_scales");
  NpyArray mins = fixture("int4_mins"), dequant = fixture("int4_dequant");
  const int64_t rows = w.shape[0], cols = w.shape[1], blocks = cols / 128;
  std::vector<uint8_t> q = quantize_fixture(DType::kInt4, w);
  std::vector<float> y(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = q.data() + r * dtype_row_bytes(DType::kInt4, cols);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = row + b * 68;
      const size_t g = static_cast<size_t>(r * blocks + b);
      EXPECT_EQ(half_at(block), scales.data[g]) << "row " << r << " block " << b;
      EXPECT_EQ(half_at(block + 2), mins.data[g]) << "row " << r << " block " << b;
      for (int j = 0; j < 128; ++j) {
        const uint8_t byte = block[4 + j % 64];
        const int code = j < 64 ? byte & 0x0F : byte >> 4;
        ASSERT_EQ(static_cast<float>(code), codes.data[static_cast<size_t>(r * cols + b * 128 + j)])
            << "row " << r << " element " << b * 128 + j;
      }
    }
    dequantize_row(DType::kInt4, row, cols, y.data());
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(y[static_cast<size_t>(c)], dequant.data[static_cast<size_t>(r * cols + c)]);
    }
  }
}

// Round trip of random f32 weights: int8 within half a step of the row's scale; int4 within
// half a step of its group (plus what rounding d and m to f16 adds).
TEST(IntQuantFormats, RoundTripErrorIsBounded) {
  const int64_t rows = 16, cols = 512;
  HostTensor w = HostTensor(DType::kF32, rows, cols).random(41, -0.2f, 0.3f);
  for (int64_t r = 0; r < rows; ++r) w.set(r, r * 3, 1.5f + r);  // outliers widen the scales
  std::vector<float> y(static_cast<size_t>(cols));
  for (DType dtype : kFormats) {
    std::vector<uint8_t> q(static_cast<size_t>(rows) * dtype_row_bytes(dtype, cols));
    quantize_rows(dtype, w.t().data, DType::kF32, rows, cols, q.data());
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = q.data() + r * dtype_row_bytes(dtype, cols);
      dequantize_row(dtype, row, cols, y.data());
      float amax = 0;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(w.at(r, c)));
      for (int64_t c = 0; c < cols; ++c) {
        const float x = w.at(r, c), got = y[static_cast<size_t>(c)];
        if (dtype == DType::kInt8) {
          const float d = amax / 127.0f;
          EXPECT_LE(std::abs(got - x), 0.5f * d * 1.0001f) << "row " << r << " col " << c;
        } else {
          const int64_t g0 = c / 128 * 128;
          float lo = x, hi = x;
          for (int64_t j = g0; j < g0 + 128; ++j) {
            lo = std::min(lo, w.at(r, j));
            hi = std::max(hi, w.at(r, j));
          }
          const float d_exact = (hi - lo) / 15.0f, d = half_at(row + c / 128 * 68);
          const float m = half_at(row + c / 128 * 68 + 2);
          const float bound = 0.5f * d + 15.0f * std::abs(d - d_exact) + std::abs(m - lo) + 1e-6f;
          EXPECT_LE(std::abs(got - x), bound) << "row " << r << " col " << c;
        }
      }
    }
  }
}

TEST(IntQuantFormats, Int8IsPerOutputChannel) {
  IntQuantWeight w = random_int_quant(DType::kInt8, 5, 640, 3);
  for (int64_t r = 0; r < 5; ++r) {
    const uint8_t* row = w.bytes.data() + r * dtype_row_bytes(DType::kInt8, 640);
    int peak = 0;
    for (int b = 0; b < 5; ++b) {
      EXPECT_EQ(std::memcmp(row, row + b * 132, 4), 0) << "row " << r << " block " << b;
      for (int j = 0; j < 128; ++j) {
        peak =
            std::max(peak, std::abs(static_cast<int>(static_cast<int8_t>(row[b * 132 + 4 + j]))));
      }
    }
    EXPECT_EQ(peak, 127) << "row " << r;  // the largest |w| of a row maps to +-127
  }
}

TEST(IntQuantFormats, RejectsBadInput) {
  std::vector<float> w(256, 0.5f);
  std::vector<uint8_t> out(dtype_row_bytes(DType::kInt4, 256));
  EXPECT_THROW(quantize_row_int4(w.data(), DType::kF32, 192, out.data()), Error);
  w[3] = std::nanf("");
  EXPECT_THROW(quantize_row_int8(w.data(), DType::kF32, 256, out.data()), Error);
  w[3] = 1e6f;  // beyond f16: the int4 scale and min could not be stored
  EXPECT_THROW(quantize_row_int4(w.data(), DType::kF32, 256, out.data()), Error);
}

TEST(IntQuantMatmul, MatchesReference) {
  // M <= 16 runs the small-M kernel; 17..64 too (batch-invariant for any M); 65+ the GEMM path.
  std::vector<int64_t> ms = {17, 33, 65, 130};
  for (int64_t m = 1; m <= kSmallBatch; ++m) ms.push_back(m);
  uint32_t seed = 11;
  for (DType dtype : kFormats) {
    for (int64_t m : ms) {
      for (int64_t k : {128, 384, 1024}) {
        const int64_t n = 37;
        seed += 3;
        HostTensor x = HostTensor(DType::kF32, m, k).random(seed);
        IntQuantWeight w = random_int_quant(dtype, n, k, seed + 1);
        HostTensor bias = HostTensor(DType::kBF16, 1, n).random(seed + 2);
        // x is rounded to int16 per 32-element group: measured up to 2.8e-5 here.
        EXPECT_LE(backend_test::matmul_rel_error(backend(), x.t(), w.view, &bias.t(), seed + 3,
                                                 (seed & 1) != 0),
                  1e-4)
            << dtype_name(dtype) << " M=" << m << " K=" << k;
      }
    }
  }
}

TEST(IntQuantMatmul, BatchInvariantUpTo16Rows) {
  for (DType dtype : kFormats) {
    const int64_t k = 768, n = 45;
    IntQuantWeight w = random_int_quant(dtype, n, k, 99);
    HostTensor x = HostTensor(DType::kF32, 16, k).random(5);
    backend_test::expect_matmul_batch_invariant(backend(), x.t(), w.view, nullptr,
                                                HostTensor(DType::kF32, 16, n), false);
  }
}

TEST(IntQuantMatmul, EmbeddingDequantisesRows) {
  for (DType dtype : kFormats) {
    IntQuantWeight table = random_int_quant(dtype, 10, 256, 3);
    HostTensor ids = backend_test::i32_vector({9, 0, 4});
    HostTensor got(DType::kF32, 3, 256), want(DType::kF32, 3, 256);
    backend().embedding(ids.t(), table.view, got.t());
    reference::embedding(ids.t(), table.view, want.t());
    EXPECT_EQ(max_rel_error(got.t(), want.t()), 0.0) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace specd
