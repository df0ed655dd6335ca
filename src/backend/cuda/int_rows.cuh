// The device layout of specd's int8/int4 weight rows: each row holds the codes of all its
// 128-element blocks (128 bytes per int8 block, 64 per int4 block, as in the block), then the
// blocks' 4-byte headers (split_int_rows writes it at upload). Rows keep the size of the blocks.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace specd::cuda {

constexpr int kIntBlockElems = 128;
// Bytes of one block (header + codes) and of its codes.
__host__ __device__ constexpr int int_block_bytes(DType dtype) {
  return dtype == DType::kInt8 ? 132 : 68;
}
__host__ __device__ constexpr int int_code_bytes(DType dtype) { return int_block_bytes(dtype) - 4; }

// Where a row's parts are, for rows of `stride` elements.
struct IntRow {
  int64_t row_bytes;  // the whole row
  int64_t headers;    // offset of block 0's header: all the row's codes come first
};
__host__ __device__ inline IntRow int_row(DType dtype, int64_t stride) {
  const int64_t blocks = stride / kIntBlockElems;
  return {blocks * int_block_bytes(dtype), blocks * int_code_bytes(dtype)};
}

}  // namespace specd::cuda
