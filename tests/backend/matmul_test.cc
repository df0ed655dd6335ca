// matmul on the CPU backend vs the double reference, and its batch invariance for M <= 16, on each
// way the backend multiplies bf16 weights (CpuBackend::Bf16Path).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference.h"
#include "core/error.h"
#include "test_util.h"

namespace specd {
namespace {

using backend_test::HostTensor;
using backend_test::max_rel_error;
using backend_test::same_bits;
using Bf16Path = CpuBackend::Bf16Path;

// f32 accumulation over K terms vs a double reference, relative to max |reference|.
constexpr double kMatmulTolerance = 1e-5;

const DType kWeightTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

CpuBackend& backend() {
  static CpuBackend instance(2);
  return instance;
}

// The bf16 paths this CPU has, the default first.
std::vector<Bf16Path> bf16_paths() {
  std::vector<Bf16Path> paths = {Bf16Path::kSimd, Bf16Path::kSimdF32};
  if (cpu::have_bf16_dot()) paths.insert(paths.begin(), Bf16Path::kDot);
  return paths;
}

const char* path_name(Bf16Path path) {
  return path == Bf16Path::kDot ? "dot" : path == Bf16Path::kSimd ? "simd" : "simd-f32";
}

// The shared backend on `path` for one scope, then back on the default.
class OnPath {
 public:
  explicit OnPath(Bf16Path path) { backend().set_bf16_path(path); }
  ~OnPath() { backend().set_bf16_path(bf16_paths().front()); }
};

// reference::matmul on x as the backend multiplies it by w: rounded to bf16 for bf16 weights
// except on kSimdF32.
void reference_matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                      bool accumulate, Bf16Path path) {
  if (path == Bf16Path::kSimdF32) return reference::matmul(x, w, bias, y, accumulate);
  backend_test::reference_matmul_bf16_x(x, w, bias, y, accumulate);
}

// Runs backend and reference matmul on the same random inputs; returns the relative error.
double matmul_error(int64_t m, int64_t k, int64_t n, DType w_dtype, DType bias_dtype,
                    bool with_bias, bool accumulate, uint32_t seed, Bf16Path path) {
  OnPath on(path);
  HostTensor x = HostTensor(DType::kF32, m, k).random(seed);
  HostTensor w = HostTensor(w_dtype, n, k).random(seed + 1);
  HostTensor bias = HostTensor(bias_dtype, 1, n).random(seed + 2);
  HostTensor y = HostTensor(DType::kF32, m, n).random(seed + 3);
  HostTensor want = y.clone();
  const Tensor* b = with_bias ? &bias.t() : nullptr;
  backend().matmul(x.t(), w.t(), b, y.t(), accumulate);
  reference_matmul(x.t(), w.t(), b, want.t(), accumulate, path);
  return max_rel_error(y.t(), want.t());
}

TEST(Matmul, MatchesReferenceAcrossShapesAndDtypes) {
  const int64_t ms[] = {1, 2, 3, 5, 8, 16, 17, 33, 65, 128};
  const std::pair<int64_t, int64_t> kn[] = {{1, 7},  {7, 1},  {13, 9}, {64, 67}, {259, 33},
                                            {31, 5}, {32, 6}, {33, 9}, {95, 11}};
  uint32_t seed = 100;
  for (Bf16Path path : bf16_paths()) {
    for (DType dtype : kWeightTypes) {
      for (int64_t m : ms) {
        for (auto [k, n] : kn) {
          seed += 10;
          double err = matmul_error(m, k, n, dtype, DType::kF32, false, false, seed, path);
          EXPECT_LE(err, kMatmulTolerance) << backend_test::name(dtype) << " " << path_name(path)
                                           << " M=" << m << " K=" << k << " N=" << n;
        }
      }
    }
  }
}

// Rounding x to bf16 is the only approximation of the bf16 paths: against the reference on x as
// it is, their error is that of bf16 activations (about 2^-9 per element), far above kSimdF32's.
TEST(Matmul, Bf16PathsRoundOnlyX) {
  HostTensor x = HostTensor(DType::kF32, 5, 1024).random(9);
  HostTensor w = HostTensor(DType::kBF16, 64, 1024).random(10);
  HostTensor exact(DType::kF32, 5, 64);
  reference::matmul(x.t(), w.t(), nullptr, exact.t(), false);
  for (Bf16Path path : bf16_paths()) {
    OnPath on(path);
    HostTensor y(DType::kF32, 5, 64);
    backend().matmul(x.t(), w.t(), nullptr, y.t(), false);
    const double err = max_rel_error(y.t(), exact.t());
    if (path == Bf16Path::kSimdF32) {
      EXPECT_LE(err, kMatmulTolerance) << path_name(path);
    } else {
      EXPECT_GT(err, 1e-4) << path_name(path) << ": x was not rounded";
      EXPECT_LE(err, 1e-2) << path_name(path);
    }
  }
}

TEST(Matmul, LargerShapesUseEveryThread) {
  // Enough work for the pool (both the small-M kernel and the GEMM path), K not a multiple
  // of any vector width, N not a multiple of the tile or block sizes.
  uint32_t seed = 2000;
  for (Bf16Path path : bf16_paths()) {
    for (DType dtype : kWeightTypes) {
      for (int64_t m : {1, 4, 16, 40, 80}) {
        seed += 10;
        double err = matmul_error(m, 1031, 203, dtype, DType::kF32, false, false, seed, path);
        EXPECT_LE(err, kMatmulTolerance)
            << backend_test::name(dtype) << " " << path_name(path) << " M=" << m;
      }
    }
  }
}

TEST(Matmul, BiasAndAccumulate) {
  uint32_t seed = 3000;
  for (Bf16Path path : bf16_paths()) {
    for (DType dtype : kWeightTypes) {
      for (DType bias_dtype : kWeightTypes) {
        for (int64_t m : {1, 3, 16, 17, 100}) {
          for (bool accumulate : {false, true}) {
            for (bool with_bias : {false, true}) {
              seed += 10;
              double err =
                  matmul_error(m, 45, 70, dtype, bias_dtype, with_bias, accumulate, seed, path);
              EXPECT_LE(err, kMatmulTolerance)
                  << backend_test::name(dtype) << " " << path_name(path) << " bias "
                  << backend_test::name(bias_dtype) << " M=" << m << " accumulate=" << accumulate
                  << " bias=" << with_bias;
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, StridedViews) {
  HostTensor x = HostTensor(DType::kF32, 20, 37, 40).random(7);
  HostTensor w = HostTensor(DType::kBF16, 11, 37, 50).random(8);
  for (Bf16Path path : bf16_paths()) {
    OnPath on(path);
    for (int64_t m : {5, 20}) {
      HostTensor y(DType::kF32, m, 11, 16), want(DType::kF32, m, 11);
      Tensor xs = x.t().slice_rows(0, m);
      backend().matmul(xs, w.t(), nullptr, y.t(), false);
      reference_matmul(xs, w.t(), nullptr, want.t(), false, path);
      EXPECT_LE(max_rel_error(y.t(), want.t()), kMatmulTolerance) << path_name(path) << " M=" << m;
    }
  }
}

// Row m of an M-row matmul must have the same bits as row m computed alone, for M <= 16.
void check_batch_invariance(CpuBackend& be, DType dtype, int64_t k, int64_t n, uint32_t seed,
                            bool with_bias, bool accumulate) {
  HostTensor x = HostTensor(DType::kF32, kSmallBatch, k).random(seed);
  HostTensor w = HostTensor(dtype, n, k).random(seed + 1);
  HostTensor bias = HostTensor(DType::kBF16, 1, n).random(seed + 2);
  HostTensor y0 = HostTensor(DType::kF32, kSmallBatch, n).random(seed + 3);
  backend_test::expect_matmul_batch_invariant(be, x.t(), w.t(), with_bias ? &bias.t() : nullptr, y0,
                                              accumulate);
}

TEST(Matmul, BatchInvariantUpToSmallBatch) {
  uint32_t seed = 4000;
  const std::pair<int64_t, int64_t> kn[] = {{1, 9}, {259, 67}, {1024, 301}};
  for (Bf16Path path : bf16_paths()) {
    OnPath on(path);
    for (DType dtype : kWeightTypes) {
      for (auto [k, n] : kn) {
        check_batch_invariance(backend(), dtype, k, n, seed += 10, false, false);
      }
      check_batch_invariance(backend(), dtype, 96, 50, seed += 10, true, true);
    }
  }
}

TEST(Matmul, SameBitsForAnyThreadCount) {
  CpuBackend one(1), three(3);
  HostTensor x = HostTensor(DType::kF32, 7, 515).random(11);
  HostTensor w = HostTensor(DType::kBF16, 333, 515).random(12);
  for (Bf16Path path : bf16_paths()) {
    one.set_bf16_path(path);
    three.set_bf16_path(path);
    HostTensor a(DType::kF32, 7, 333), b(DType::kF32, 7, 333);
    one.matmul(x.t(), w.t(), nullptr, a.t(), false);
    three.matmul(x.t(), w.t(), nullptr, b.t(), false);
    for (int64_t r = 0; r < 7; ++r) {
      EXPECT_TRUE(same_bits(a.t(), r, b.t(), r)) << path_name(path) << " row " << r;
    }
  }
}

// A column's bits do not depend on the other columns of the product: each column of a product
// over 333 weight rows equals the product over that weight row alone (tiles of several columns
// against one).
TEST(Matmul, SameBitsForAnyColumns) {
  HostTensor x = HostTensor(DType::kF32, 7, 515).random(13);
  HostTensor w = HostTensor(DType::kBF16, 333, 515).random(14);
  for (Bf16Path path : bf16_paths()) {
    OnPath on(path);
    HostTensor all(DType::kF32, 7, 333), one(DType::kF32, 7, 1);
    backend().matmul(x.t(), w.t(), nullptr, all.t(), false);
    for (int64_t n : {0, 1, 83, 166, 250, 331, 332}) {
      const Tensor row = Tensor::make(w.t().row<uint16_t>(n), DType::kBF16, 1, w.t().cols);
      backend().matmul(x.t(), row, nullptr, one.t(), false);
      for (int64_t r = 0; r < 7; ++r) {
        const float a = all.t().row<const float>(r)[n], b = one.t().row<const float>(r)[0];
        EXPECT_EQ(std::memcmp(&a, &b, sizeof(float)), 0)
            << path_name(path) << " column " << n << " row " << r << ": " << a << " vs " << b;
      }
    }
  }
}

TEST(Matmul, RejectsMismatchedShapes) {
  HostTensor x(DType::kF32, 2, 8), w(DType::kBF16, 4, 9), y(DType::kF32, 2, 4);
  EXPECT_THROW(backend().matmul(x.t(), w.t(), nullptr, y.t(), false), Error);
  HostTensor w2(DType::kI32, 4, 8);
  EXPECT_THROW(backend().matmul(x.t(), w2.t(), nullptr, y.t(), false), Error);
  HostTensor w3(DType::kF32, 4, 8), bias(DType::kF32, 1, 5);
  EXPECT_THROW(backend().matmul(x.t(), w3.t(), &bias.t(), y.t(), false), Error);
  HostTensor square = HostTensor(DType::kF32, 2, 8).random(1), w4(DType::kF32, 8, 8);
  EXPECT_THROW(backend().matmul(square.t(), w4.t(), nullptr, square.t(), false), Error);
}

}  // namespace
}  // namespace specd
