// Test helper: random bf16 weights quantised to specd's int8/int4 formats.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/quantize.h"
#include "test_util.h"

namespace specd::backend_test {

// A [rows, cols] weight quantised from random bf16 values in [-scale, scale) (plus an outlier
// per row, so that per-channel scales differ); `bytes` owns the blocks.
struct IntQuantWeight {
  std::vector<uint8_t> bytes;
  Tensor view;
};

inline IntQuantWeight random_int_quant(DType dtype, int64_t rows, int64_t cols, uint32_t seed,
                                       float scale = 0.1f) {
  HostTensor source = HostTensor(DType::kBF16, rows, cols).random(seed, -scale, scale);
  for (int64_t r = 0; r < rows; ++r) source.set(r, (r * 7) % cols, scale * (2.0f + r % 3));
  IntQuantWeight w;
  w.bytes.resize(static_cast<size_t>(rows) * dtype_row_bytes(dtype, cols) + 64);
  quantize_rows(dtype, source.t().data, DType::kBF16, rows, cols, w.bytes.data());
  w.view = Tensor::make(w.bytes.data(), dtype, rows, cols);
  return w;
}

}  // namespace specd::backend_test
