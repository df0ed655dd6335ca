// embedding, rms_norm, rope and silu_mul on the CPU backend vs the double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference.h"
#include "core/error.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::i32_vector;
using backend_test::max_rel_error;
using backend_test::same_bits;

// f32 arithmetic (a few roundings per element) vs double, relative to max |reference|.
constexpr double kElementwiseTolerance = 2e-6;
// rms_norm reduces D squares in f32 first (observed about 1e-7 for D up to 8192).
constexpr double kNormTolerance = 1e-6;

const DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

CpuBackend& backend() {
  static CpuBackend instance(2);
  return instance;
}

TEST(Embedding, CopiesAndWidensRows) {
  uint32_t seed = 10;
  for (DType dtype : kFloatTypes) {
    for (int64_t d : {1, 7, 64, 1000}) {
      HostTensor table = HostTensor(dtype, 50, d).random(seed += 3);
      std::vector<int32_t> ids_list = {3, 0, 49, 3, 17, 8, 8, 22, 41, 1, 2};
      for (int64_t m : {1, 5, 11}) {
        HostTensor ids = i32_vector(std::vector<int32_t>(ids_list.begin(), ids_list.begin() + m));
        HostTensor out(DType::kF32, m, d), want(DType::kF32, m, d);
        backend().embedding(ids.t(), table.t(), out.t());
        reference::embedding(ids.t(), table.t(), want.t());
        EXPECT_EQ(max_rel_error(out.t(), want.t()), 0.0) << backend_test::name(dtype) << " D=" << d;
      }
    }
  }
}

TEST(Embedding, RejectsOutOfRangeIds) {
  HostTensor table = HostTensor(DType::kBF16, 10, 4).random(1);
  HostTensor out(DType::kF32, 2, 4);
  for (int32_t bad : {10, -1, 1 << 30}) {
    HostTensor ids = i32_vector({2, bad});
    try {
      backend().embedding(ids.t(), table.t(), out.t());
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

TEST(RmsNorm, MatchesReference) {
  uint32_t seed = 100;
  for (DType dtype : kFloatTypes) {
    for (int64_t rows : {1, 3, 17, 128}) {
      for (int64_t d : {1, 5, 8, 33, 128, 1027}) {
        HostTensor x = HostTensor(DType::kF32, rows, d).random(seed += 3, -3.0f, 3.0f);
        HostTensor w = HostTensor(dtype, 1, d).random(seed + 1, 0.5f, 1.5f);
        HostTensor y(DType::kF32, rows, d), want(DType::kF32, rows, d);
        backend().rms_norm(x.t(), w.t(), 1e-6f, y.t());
        reference::rms_norm(x.t(), w.t(), 1e-6f, want.t());
        EXPECT_LE(max_rel_error(y.t(), want.t()), kNormTolerance)
            << backend_test::name(dtype) << " rows=" << rows << " D=" << d;
      }
    }
  }
}

TEST(RmsNorm, PerHeadViewsAndInPlace) {
  // Qwen3-style q_norm: [M, H * Dh] viewed as [M * H, Dh], normalised in place.
  const int64_t m = 5, heads = 16, dh = 128;
  HostTensor x = HostTensor(DType::kF32, m, heads * dh).random(7, -2.0f, 2.0f);
  HostTensor w = HostTensor(DType::kBF16, 1, dh).random(8, 0.5f, 1.5f);
  HostTensor want(DType::kF32, m * heads, dh);
  Tensor view = x.t().reshape_cols(dh);
  reference::rms_norm(view, w.t(), 1e-6f, want.t());
  backend().rms_norm(view, w.t(), 1e-6f, view);
  EXPECT_LE(max_rel_error(view, want.t()), kNormTolerance);
  // Each row is normalised on its own: row r of the batch equals row r alone.
  HostTensor y = HostTensor(DType::kF32, 1, dh);
  HostTensor x2 = HostTensor(DType::kF32, m * heads, dh).random(9);
  HostTensor all(DType::kF32, m * heads, dh);
  backend().rms_norm(x2.t(), w.t(), 1e-5f, all.t());
  for (int64_t r = 0; r < m * heads; ++r) {
    backend().rms_norm(x2.t().slice_rows(r, 1), w.t(), 1e-5f, y.t());
    ASSERT_TRUE(same_bits(all.t(), r, y.t(), 0)) << "row " << r;
  }
}

TEST(Rope, MatchesReference) {
  uint32_t seed = 300;
  for (int64_t half : {1, 3, 32, 64, 67}) {
    const int64_t max_pos = 300;
    HostTensor cos(DType::kF32, max_pos, half), sin(DType::kF32, max_pos, half);
    for (int64_t p = 0; p < max_pos; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        double inv_freq = std::pow(10000.0, -2.0 * i / (2.0 * half));
        cos.set(p, i, static_cast<float>(std::cos(p * inv_freq)));
        sin.set(p, i, static_cast<float>(std::sin(p * inv_freq)));
      }
    }
    RopeTable table{cos.t(), sin.t()};
    for (int heads : {1, 4}) {
      for (int64_t m : {1, 6, 40}) {
        std::vector<int32_t> positions(m);
        for (int64_t i = 0; i < m; ++i) positions[i] = static_cast<int32_t>((i * 37 + 5) % max_pos);
        HostTensor pos = i32_vector(positions);
        HostTensor x = HostTensor(DType::kF32, m, heads * 2 * half).random(seed += 3);
        HostTensor want = x.clone();
        backend().rope(x.t(), heads, pos.t(), table);
        reference::rope(want.t(), heads, pos.t(), table);
        EXPECT_LE(max_rel_error(x.t(), want.t()), kElementwiseTolerance)
            << "half=" << half << " heads=" << heads << " M=" << m;
      }
    }
  }
}

TEST(Rope, RejectsPositionsOutsideTheTable) {
  HostTensor cos = HostTensor(DType::kF32, 8, 4).random(1), sin = HostTensor(DType::kF32, 8, 4);
  RopeTable table{cos.t(), sin.t()};
  HostTensor x = HostTensor(DType::kF32, 2, 16).random(2);
  for (int32_t bad : {8, -1}) {
    HostTensor pos = i32_vector({0, bad});
    EXPECT_THROW(backend().rope(x.t(), 2, pos.t(), table), Error) << bad;
  }
  HostTensor pos = i32_vector({0, 1});
  EXPECT_THROW(backend().rope(x.t(), 3, pos.t(), table), Error);  // 3 heads * 8 != 16 cols
}

TEST(SiluMul, MatchesReference) {
  uint32_t seed = 500;
  for (int64_t rows : {1, 3, 64}) {
    for (int64_t f : {1, 7, 16, 1000, 4099}) {
      HostTensor gate = HostTensor(DType::kF32, rows, f).random(seed += 3, -12.0f, 12.0f);
      HostTensor up = HostTensor(DType::kF32, rows, f).random(seed + 1, -2.0f, 2.0f);
      HostTensor out(DType::kF32, rows, f), want(DType::kF32, rows, f);
      backend().silu_mul(gate.t(), up.t(), out.t());
      reference::silu_mul(gate.t(), up.t(), want.t());
      EXPECT_LE(max_rel_error(out.t(), want.t()), kElementwiseTolerance)
          << "rows=" << rows << " F=" << f;
    }
  }
}

TEST(SiluMul, ExtremeGates) {
  HostTensor gate(DType::kF32, 1, 6), up(DType::kF32, 1, 6);
  const float g[] = {-1000.0f, -100.0f, -88.5f, 0.0f, 90.0f, 1000.0f};
  for (int i = 0; i < 6; ++i) gate.set(0, i, g[i]), up.set(0, i, 1.5f);
  HostTensor out(DType::kF32, 1, 6), want(DType::kF32, 1, 6);
  backend().silu_mul(gate.t(), up.t(), out.t());
  reference::silu_mul(gate.t(), up.t(), want.t());
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(out.at(0, i), want.at(0, i), 1e-6 * std::abs(want.at(0, i)) + 1e-30) << g[i];
  }
}

TEST(ArgmaxRows, PicksTheFirstLargestLogitLikeASequentialScan) {
  const float nan = std::nanf(""), inf = INFINITY;
  // Each row with the column a sequential `>` scan keeps.
  const std::vector<std::pair<std::vector<float>, int32_t>> cases = {
      {{0.5f, 2.0f, -1.0f, 2.0f}, 1},  // ties: the first
      {{-inf, -inf, -inf, -inf}, 0},   // all equal
      {{1.0f, nan, 3.0f, nan}, 2},     // a NaN never wins after column 0
      {{nan, 5.0f, 7.0f, 1.0f}, 0},    // a NaN in column 0 is never replaced
      {{-3.0f, -2.0f, inf, inf}, 2},   // +inf ties
  };
  HostTensor logits(DType::kF32, static_cast<int64_t>(cases.size()), 4);
  for (size_t r = 0; r < cases.size(); ++r) {
    std::copy(cases[r].first.begin(), cases[r].first.end(), logits.t().row<float>(r));
  }
  HostTensor ids(DType::kI32, 1, static_cast<int64_t>(cases.size()));
  backend().argmax_rows(logits.t(), ids.t());
  for (size_t r = 0; r < cases.size(); ++r) EXPECT_EQ(ids.i32()[r], cases[r].second) << "row " << r;
  HostTensor wrong(DType::kI32, 1, 2);
  EXPECT_THROW(backend().argmax_rows(logits.t(), wrong.t()), Error);
}

// Long rows go through the vector path: random rows with the maximum (tied, or next to NaNs and
// infinities) in vector bodies and in the tail, against the reference scan.
TEST(ArgmaxRows, LongRowsMatchTheReference) {
  const float nan = std::nanf(""), inf = INFINITY;
  for (int64_t cols : {7, 8, 33, 1000, 4099}) {
    HostTensor logits = HostTensor(DType::kF32, 8, cols).random(static_cast<uint32_t>(cols));
    auto row = [&](int64_t r) { return logits.t().row<float>(r); };
    row(1)[cols - 1] = 9.0f;                           // the last column
    row(2)[cols / 2] = 9.0f, row(2)[cols - 1] = 9.0f;  // a tie: the first
    row(3)[cols / 3] = nan, row(3)[cols / 2] = 9.0f;
    row(4)[0] = nan;
    row(5)[cols / 2] = inf, row(5)[cols - 1] = inf;
    std::fill(row(6), row(6) + cols, -inf);
    std::fill(row(7), row(7) + cols, nan);
    row(7)[cols - 1] = 1.0f, row(7)[0] = 0.5f;
    HostTensor got(DType::kI32, 1, 8), want(DType::kI32, 1, 8);
    backend().argmax_rows(logits.t(), got.t());
    reference::argmax_rows(logits.t(), want.t());
    for (int r = 0; r < 8; ++r) EXPECT_EQ(got.i32()[r], want.i32()[r]) << cols << " row " << r;
  }
}

}  // namespace
}  // namespace specd
