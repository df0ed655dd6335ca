// The device layout of specd's int8/int4 weights: rows in groups of 8 (the last one padded with
// zero rows). A group holds its rows' codes in 64-byte pieces, piece p of rows 0..7 side by side
// (512 bytes), so that a warp's 16-byte loads of the 8 rows read 512 contiguous bytes; then the
// rows' 4-byte block headers, block b of rows 0..7 side by side. to_device_int_layout writes it
// at upload.
#pragma once

#include <cuda_runtime.h>  // __host__ __device__, also for host code

#include <cstdint>

#include "core/dtype.h"

namespace specd::cuda {

constexpr int kIntBlockElems = 128;
constexpr int kIntGroupRows = 8;
constexpr int kIntPieceBytes = 64;
// Bytes of one block (header + codes) and of its codes.
__host__ __device__ constexpr int int_block_bytes(DType dtype) {
  return dtype == DType::kInt8 ? 132 : 68;
}
__host__ __device__ constexpr int int_code_bytes(DType dtype) { return int_block_bytes(dtype) - 4; }

// The sizes of a group of rows of `stride` elements.
struct IntLayout {
  int64_t group_bytes;  // the whole group: its codes, then its headers
  int64_t headers;      // offset of the group's headers
};
__host__ __device__ inline IntLayout int_layout(DType dtype, int64_t stride) {
  const int64_t blocks = stride / kIntBlockElems;
  return {kIntGroupRows * blocks * int_block_bytes(dtype),
          kIntGroupRows * blocks * int_code_bytes(dtype)};
}
// Offset of row `row`'s group.
__host__ __device__ inline int64_t int_group_offset(IntLayout layout, int64_t row) {
  return row / kIntGroupRows * layout.group_bytes;
}
// Offset of byte `at` of row `row`'s codes (block b's codes are bytes b * code bytes onwards, in
// the order of the block).
__host__ __device__ inline int64_t int_code_offset(IntLayout layout, int64_t row, int64_t at) {
  return int_group_offset(layout, row) + at / kIntPieceBytes * (kIntGroupRows * kIntPieceBytes) +
         row % kIntGroupRows * kIntPieceBytes + at % kIntPieceBytes;
}
// Offset of row `row`'s header of block `block`.
__host__ __device__ inline int64_t int_header_offset(IntLayout layout, int64_t row, int64_t block) {
  return int_group_offset(layout, row) + layout.headers +
         (block * kIntGroupRows + row % kIntGroupRows) * 4;
}

}  // namespace specd::cuda
