// Test helper: random but valid weights in GGUF's block formats (finite, moderate f16 scales).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/quant_ref.h"
#include "test_util.h"

namespace specd::backend_test {

inline constexpr DType kBlockQuantTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                                             DType::kQ5_0, DType::kQ5_1, DType::kQ4_K,
                                             DType::kQ5_K, DType::kQ6_K};

// A [rows, cols] weight of random blocks: random codes (and k-quant sub-block scales), f16 scales
// in [0.002, 0.05) and mins in [-0.1, 0.1); `bytes` owns the blocks.
struct BlockQuantWeight {
  std::vector<uint8_t> bytes;
  Tensor view;
};

inline BlockQuantWeight random_block_quant(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  BlockQuantWeight q;
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  q.bytes.resize(row_bytes * static_cast<size_t>(rows) + 64);
  std::mt19937 rng(seed);
  for (uint8_t& b : q.bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.002f, 0.05f), shift(-0.1f, 0.1f);
  const size_t block_bytes = dtype_block_bytes(dtype);
  const auto fields = block_half_offsets(dtype);
  for (size_t b = 0; b < row_bytes * rows / block_bytes; ++b) {
    for (size_t f = 0; f < fields.size(); ++f) {
      uint16_t h = f32_to_f16(f == 0 ? scale(rng) : shift(rng));
      std::memcpy(q.bytes.data() + b * block_bytes + fields[f], &h, 2);
    }
  }
  q.view = Tensor::make(q.bytes.data(), dtype, rows, cols);
  return q;
}

}  // namespace specd::backend_test
