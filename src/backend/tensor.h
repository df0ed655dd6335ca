// Non-owning 2-D tensor views and the device they live on.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace specd {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

// Parses "cpu", "cuda" or "cuda:N"; throws specd::Error otherwise.
Device parse_device(const std::string& text);
std::string device_name(Device device);

// A row-major view [rows, cols] with a row stride in elements (stride >= cols).
// Vectors are [1, n]. The view does not own its memory. For block-quantised dtypes cols and
// stride are whole numbers of blocks, and byte sizes come from dtype_row_bytes.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;
  Device device{};

  static Tensor make(void* data, DType dtype, int64_t rows, int64_t cols, Device device = {}) {
    return Tensor{data, dtype, rows, cols, cols, device};
  }
  int64_t numel() const { return rows * cols; }
  size_t bytes() const { return static_cast<size_t>(rows) * dtype_row_bytes(dtype, cols); }
  size_t row_bytes() const { return dtype_row_bytes(dtype, stride); }
  bool contiguous() const { return stride == cols; }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  template <typename T>
  T* row(int64_t r) const { return static_cast<T*>(data) + r * stride; }
  // Rows [begin, begin + count) of this view.
  Tensor slice_rows(int64_t begin, int64_t count) const {
    Tensor out = *this;
    out.data = static_cast<char*>(data) + dtype_row_bytes(dtype, begin * stride);
    out.rows = count;
    return out;
  }
  // Reinterprets a contiguous [rows, cols] view as [rows * cols / new_cols, new_cols].
  Tensor reshape_cols(int64_t new_cols) const {
    Tensor out = *this;
    out.rows = numel() / new_cols;
    out.cols = new_cols;
    out.stride = new_cols;
    return out;
  }
};

}  // namespace specd
