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

}  // namespace specd::backend_test
