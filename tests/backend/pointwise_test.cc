// gelu_tanh_mul, scale and add (Gemma 3's element-wise ops) on the CPU backend vs the double
// reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference.h"
#include "core/error.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::same_bits;

// f32 arithmetic (a few roundings per element, tanh to a few ulp) vs double. For gate << 0,
// 1 + tanh(...) cancels in f32 (as in PyTorch), so errors are relative to max |gate * up|.
constexpr double kElementwiseTolerance = 2e-6;

double max_error_vs_inputs(const HostTensor& gate, const HostTensor& up, const HostTensor& out,
                           const HostTensor& want) {
  double max_diff = 0, max_scale = 0;
  for (int64_t r = 0; r < gate.t().rows; ++r) {
    for (int64_t c = 0; c < gate.t().cols; ++c) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(out.at(r, c)) - want.at(r, c)));
      max_scale = std::max(max_scale, std::abs(static_cast<double>(gate.at(r, c)) * up.at(r, c)));
    }
  }
  return max_diff / max_scale;
}

CpuBackend& backend() {
  static CpuBackend instance(2);
  return instance;
}

TEST(GeluTanhMul, MatchesReference) {
  uint32_t seed = 40;
  for (int64_t rows : {1, 3, 64}) {
    for (int64_t f : {1, 7, 16, 1000, 4099}) {
      HostTensor gate = HostTensor(DType::kF32, rows, f).random(seed += 3, -8.0f, 8.0f);
      HostTensor up = HostTensor(DType::kF32, rows, f).random(seed + 1, -2.0f, 2.0f);
      HostTensor out(DType::kF32, rows, f), want(DType::kF32, rows, f);
      backend().gelu_tanh_mul(gate.t(), up.t(), out.t());
      reference::gelu_tanh_mul(gate.t(), up.t(), want.t());
      EXPECT_LE(max_error_vs_inputs(gate, up, out, want), kElementwiseTolerance)
          << "rows=" << rows << " F=" << f;
    }
  }
}

// Element by element, relative to each value: near zero and far in both tails (where tanh
// saturates and gelu(g) -> 0 or g).
TEST(GeluTanhMul, ExtremeAndSmallGates) {
  const float g[] = {-1000.0f, -30.0f, -5.0f, -1e-3f, 0.0f, 1e-3f, 0.5f, 5.0f, 30.0f, 1000.0f};
  const int n = static_cast<int>(std::size(g));
  HostTensor gate(DType::kF32, 1, n), up(DType::kF32, 1, n);
  for (int i = 0; i < n; ++i) gate.set(0, i, g[i]), up.set(0, i, 1.5f);
  HostTensor out(DType::kF32, 1, n), want(DType::kF32, 1, n);
  backend().gelu_tanh_mul(gate.t(), up.t(), out.t());
  reference::gelu_tanh_mul(gate.t(), up.t(), want.t());
  for (int i = 0; i < n; ++i) {
    const double cancellation = 1.2e-7 * std::abs(g[i] * 1.5);  // half an ulp of 1 + tanh
    EXPECT_NEAR(out.at(0, i), want.at(0, i), 4e-6 * std::abs(want.at(0, i)) + cancellation) << g[i];
  }
  EXPECT_NEAR(want.at(0, 7), 1.5 * 4.999999, 1e-5);  // gelu(5) = 5 * (1 - 3e-7)
}

TEST(GeluTanhMul, InPlaceAndBatchInvariant) {
  HostTensor gate = HostTensor(DType::kF32, 16, 300).random(60, -6.0f, 6.0f);
  HostTensor up = HostTensor(DType::kF32, 16, 300).random(61);
  HostTensor all(DType::kF32, 16, 300);
  backend().gelu_tanh_mul(gate.t(), up.t(), all.t());
  for (int64_t r = 0; r < 16; ++r) {
    HostTensor one(DType::kF32, 1, 300);
    backend().gelu_tanh_mul(gate.t().slice_rows(r, 1), up.t().slice_rows(r, 1), one.t());
    EXPECT_TRUE(same_bits(all.t(), r, one.t(), 0)) << r;
  }
  HostTensor copy = gate.clone();
  backend().gelu_tanh_mul(copy.t(), up.t(), copy.t());
  for (int64_t r = 0; r < 16; ++r) EXPECT_TRUE(same_bits(all.t(), r, copy.t(), r)) << r;
}

TEST(Scale, ExactF32Products) {
  HostTensor x = HostTensor(DType::kF32, 5, 37).random(70, -3.0f, 3.0f);
  HostTensor want = x.clone();
  backend().scale(x.t(), 25.298221f);
  reference::scale(want.t(), 25.298221f);
  for (int64_t r = 0; r < 5; ++r) EXPECT_TRUE(same_bits(x.t(), r, want.t(), r)) << r;
  EXPECT_NE(x.at(0, 0), 0.0f);
}

TEST(Add, ExactF32Sums) {
  HostTensor x = HostTensor(DType::kF32, 5, 37).random(80, -3.0f, 3.0f);
  HostTensor y = HostTensor(DType::kF32, 5, 37).random(81, -100.0f, 100.0f);
  HostTensor want = y.clone();
  backend().add(x.t(), y.t());
  reference::add(x.t(), want.t());
  for (int64_t r = 0; r < 5; ++r) EXPECT_TRUE(same_bits(y.t(), r, want.t(), r)) << r;
  EXPECT_THROW(backend().add(x.t(), x.t()), Error);
  HostTensor narrow(DType::kF32, 5, 36);
  EXPECT_THROW(backend().add(x.t(), narrow.t()), Error);
}

}  // namespace
}  // namespace specd
