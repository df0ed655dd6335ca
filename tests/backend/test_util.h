// Helpers for the backend op tests: owned host tensors, seeded random fills, error metrics.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/reference.h"
#include "core/dtype.h"

namespace specd::backend_test {

// A host tensor that owns its storage (64-byte aligned). Moves keep the data where it is, so
// views taken from it stay valid; clone() makes a deep copy.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, int64_t rows, int64_t cols, int64_t stride = 0) {
    stride = std::max(stride, cols);
    bytes_ = static_cast<size_t>(std::max<int64_t>(1, rows) * stride) * dtype_size(dtype);
    storage_ = std::make_unique<uint8_t[]>(bytes_ + 64);
    view_ = Tensor::make(aligned(), dtype, rows, cols);
    view_.stride = stride;
  }
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;

  HostTensor clone() const {
    HostTensor out(view_.dtype, view_.rows, view_.cols, view_.stride);
    std::memcpy(out.view_.data, view_.data, bytes_);
    return out;
  }

  Tensor& t() { return view_; }
  const Tensor& t() const { return view_; }
  float at(int64_t r, int64_t c) const {
    return load_as_f32(view_.data, view_.dtype, static_cast<size_t>(r * view_.stride + c));
  }
  void set(int64_t r, int64_t c, float value) {
    store_from_f32(view_.data, view_.dtype, static_cast<size_t>(r * view_.stride + c), value);
  }
  int32_t* i32() { return view_.ptr<int32_t>(); }

  // Uniform values in [lo, hi) (rounded to the dtype), from a fixed seed; never all zeros.
  HostTensor& random(uint32_t seed, float lo = -1.0f, float hi = 1.0f) & {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t r = 0; r < view_.rows; ++r) {
      for (int64_t c = 0; c < view_.cols; ++c) set(r, c, dist(rng));
    }
    return *this;
  }
  HostTensor random(uint32_t seed, float lo = -1.0f, float hi = 1.0f) && {
    random(seed, lo, hi);
    return std::move(*this);
  }

 private:
  void* aligned() {
    auto p = reinterpret_cast<uintptr_t>(storage_.get());
    return storage_.get() + ((64 - p % 64) % 64);
  }

  std::unique_ptr<uint8_t[]> storage_;
  size_t bytes_ = 0;
  Tensor view_;
};

// An i32 [1, n] tensor holding `values`.
inline HostTensor i32_vector(const std::vector<int32_t>& values) {
  HostTensor t(DType::kI32, 1, static_cast<int64_t>(values.size()));
  if (!values.empty()) std::memcpy(t.i32(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

// An f32 copy of x with each value rounded to bf16 (ties to even): what the CPU backend multiplies
// bf16 weights by (CpuBackend::Bf16Path).
inline HostTensor rounded_to_bf16(const Tensor& x) {
  HostTensor out(DType::kF32, x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) {
      out.t().row<float>(r)[c] = round_to_bf16(x.row<const float>(r)[c]);
    }
  }
  return out;
}

// max |got - want| / max |want| over a [rows, cols] f32 pair.
inline double max_rel_error(const Tensor& got, const Tensor& want) {
  double max_err = 0.0, max_ref = 0.0;
  for (int64_t r = 0; r < want.rows; ++r) {
    for (int64_t c = 0; c < want.cols; ++c) {
      double g = got.row<const float>(r)[c], w = want.row<const float>(r)[c];
      if (std::isnan(g)) return INFINITY;
      max_err = std::max(max_err, std::abs(g - w));
      max_ref = std::max(max_ref, std::abs(w));
    }
  }
  return max_ref == 0.0 ? max_err : max_err / max_ref;
}

// True if row r of a and row r2 of b have identical bits over `cols` f32 values.
inline bool same_bits(const Tensor& a, int64_t r, const Tensor& b, int64_t r2) {
  return std::memcmp(a.row<const float>(r), b.row<const float>(r2),
                     static_cast<size_t>(a.cols) * sizeof(float)) == 0;
}

inline const char* name(DType dtype) { return dtype_name(dtype).data(); }

// The largest relative error of be.matmul(x, w, bias, y) against the reference, y starting as
// random values (seeded) that the product is added to when `accumulate`.
inline double matmul_rel_error(Backend& be, const Tensor& x, const Tensor& w, const Tensor* bias,
                               uint32_t seed, bool accumulate) {
  HostTensor y = HostTensor(DType::kF32, x.rows, w.rows).random(seed);
  HostTensor want = y.clone();
  be.matmul(x, w, bias, y.t(), accumulate);
  reference::matmul(x, w, bias, want.t(), accumulate);
  return max_rel_error(y.t(), want.t());
}

// Every row of an M-row product x · wᵀ (+ bias; added to y0 when accumulating) has the bits of
// that row computed alone, for every M up to x.rows.
inline void expect_matmul_batch_invariant(Backend& be, const Tensor& x, const Tensor& w,
                                          const Tensor* bias, const HostTensor& y0,
                                          bool accumulate) {
  HostTensor alone = y0.clone();
  for (int64_t r = 0; r < x.rows; ++r) {
    Tensor out = alone.t().slice_rows(r, 1);
    be.matmul(x.slice_rows(r, 1), w, bias, out, accumulate);
  }
  for (int64_t m = 1; m <= x.rows; ++m) {
    HostTensor batch = y0.clone();
    Tensor out = batch.t().slice_rows(0, m);
    be.matmul(x.slice_rows(0, m), w, bias, out, accumulate);
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_TRUE(same_bits(out, r, alone.t(), r))
          << name(w.dtype) << " K=" << w.cols << " N=" << w.rows << ": row " << r << " of M=" << m
          << " differs from the row computed alone";
    }
  }
}

// reference::matmul on x as specd's bf16 matmuls multiply it (the CPU's bf16 paths, the CUDA
// small-M kernel and prefill GEMM): rounded to bf16 for bf16 weights, as it is otherwise.
inline void reference_matmul_bf16_x(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                                    bool accumulate) {
  if (w.dtype != DType::kBF16) return reference::matmul(x, w, bias, y, accumulate);
  HostTensor rounded = rounded_to_bf16(x);
  reference::matmul(rounded.t(), w, bias, y, accumulate);
}

// rms_norm(r, g) · wᵀ + bias as a matmul reading a folded norm computes it: (r ⊙ g) · wᵀ (x
// rounded to bf16 for bf16 weights), each row scaled by its inverse RMS, then the bias added.
inline HostTensor reference_folded_products(const Tensor& r, const Tensor& g, float eps,
                                            const Tensor& w, const Tensor* bias) {
  HostTensor scaled(DType::kF32, r.rows, r.cols), y(DType::kF32, r.rows, w.rows);
  std::vector<double> inv_rms(r.rows);
  for (int64_t i = 0; i < r.rows; ++i) {
    double sum_sq = 0.0;
    for (int64_t c = 0; c < r.cols; ++c) {
      const float v = r.row<const float>(i)[c];
      sum_sq += static_cast<double>(v) * v;
      scaled.t().row<float>(i)[c] = v * load_as_f32(g.data, g.dtype, c);
    }
    inv_rms[i] = 1.0 / std::sqrt(sum_sq / static_cast<double>(r.cols) + eps);
  }
  reference_matmul_bf16_x(scaled.t(), w, nullptr, y.t(), false);
  for (int64_t i = 0; i < r.rows; ++i) {
    for (int64_t n = 0; n < w.rows; ++n) {
      float& out = y.t().row<float>(i)[n];
      out = static_cast<float>(out * inv_rms[i]);
      if (bias != nullptr) out += load_as_f32(bias->data, bias->dtype, n);
    }
  }
  return y;
}

}  // namespace specd::backend_test
