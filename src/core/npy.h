// Reads and writes NumPy .npy files of float32 (C order), for logits dumps and golden data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specd {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // C order, product(shape) elements
};

// Writes a little-endian f32 array; throws specd::Error on I/O failure.
void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);
// Reads a little-endian f32 C-order array; throws specd::Error on anything else.
NpyArray read_npy_f32(const std::string& path);

}  // namespace specd
