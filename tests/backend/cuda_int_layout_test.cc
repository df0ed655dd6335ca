// The device layout of int8/int4 weights (groups of 8 rows, 64-byte pieces side by side; see
// backend/cuda/int_rows.cuh), checked on the host: every byte of the host blocks has its own
// place, the upload copy puts each one there, and the addresses the tensor-core kernel walks
// (one 16-byte load per lane, fixed strides per block) are the layout's. Needs no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/int_rows.cuh"
#include "backend/cuda/kernels.h"
#include "int_quant_util.h"

namespace specd {
namespace {

using backend_test::random_int_quant;
using cuda::int_code_bytes;
using cuda::int_code_offset;
using cuda::int_header_offset;
using cuda::int_layout;
using cuda::IntLayout;
using cuda::kIntBlockElems;
using cuda::kIntGroupRows;
using cuda::kIntPieceBytes;

const DType kFormats[] = {DType::kInt8, DType::kInt4};
const int64_t kRows[] = {1, 7, 8, 13, 37};
const int64_t kStrides[] = {128, 384, 1024};

TEST(CudaIntLayout, EveryByteHasItsOwnPlace) {
  for (DType dtype : kFormats) {
    for (int64_t rows : kRows) {
      for (int64_t stride : kStrides) {
        const IntLayout layout = int_layout(dtype, stride);
        const size_t size = cuda::int_weight_bytes(dtype, rows, stride);
        const int64_t blocks = stride / kIntBlockElems, code_bytes = int_code_bytes(dtype);
        std::vector<int> hits(size, 0);
        auto mark = [&](int64_t at) {
          ASSERT_GE(at, 0);
          ASSERT_LT(at, static_cast<int64_t>(size));
          ++hits[static_cast<size_t>(at)];
        };
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t b = 0; b < blocks; ++b) {
            for (int i = 0; i < 4; ++i) mark(int_header_offset(layout, r, b) + i);
          }
          for (int64_t at = 0; at < blocks * code_bytes; ++at) mark(int_code_offset(layout, r, at));
        }
        int64_t used = 0;
        for (int h : hits) {
          ASSERT_LE(h, 1) << dtype_name(dtype) << " rows=" << rows << " stride=" << stride;
          used += h;
        }
        EXPECT_EQ(used, rows * static_cast<int64_t>(dtype_row_bytes(dtype, stride)));
        // Whole groups, nothing more.
        EXPECT_EQ(size, static_cast<size_t>((rows + 7) / 8 * layout.group_bytes));
      }
    }
  }
}

TEST(CudaIntLayout, UploadCopyPutsEveryByteInItsPlace) {
  for (DType dtype : kFormats) {
    for (int64_t rows : kRows) {
      const int64_t stride = 384, blocks = stride / kIntBlockElems;
      const int64_t code_bytes = int_code_bytes(dtype), block_bytes = code_bytes + 4;
      const backend_test::IntQuantWeight w = random_int_quant(dtype, rows, stride, 5);
      std::vector<uint8_t> device(cuda::int_weight_bytes(dtype, rows, stride), 0xAB);
      cuda::to_device_int_layout(w.bytes.data(), dtype, rows, stride, device.data());
      const IntLayout layout = int_layout(dtype, stride);
      std::vector<bool> placed(device.size(), false);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* block = w.bytes.data() + (r * blocks + b) * block_bytes;
          for (int i = 0; i < 4; ++i) {
            const auto at = static_cast<size_t>(int_header_offset(layout, r, b) + i);
            ASSERT_EQ(device[at], block[i]) << "header of row " << r << " block " << b;
            placed[at] = true;
          }
          for (int64_t i = 0; i < code_bytes; ++i) {
            const auto at = static_cast<size_t>(int_code_offset(layout, r, b * code_bytes + i));
            ASSERT_EQ(device[at], block[4 + i])
                << "code " << i << " of row " << r << " block " << b;
            placed[at] = true;
          }
        }
      }
      // The padding rows of the last group are zeros (the caller's buffer is not).
      for (size_t at = 0; at < device.size(); ++at) {
        if (!placed[at]) {
          ASSERT_EQ(device[at], 0) << dtype_name(dtype) << " byte " << at;
        }
      }
    }
  }
}

// Lane (g, c) of a warp loads bytes 16c .. 16c + 15 of each 64-byte piece of weight row g of a
// group, starting from its piece-0 address and stepping 512 bytes a piece, and row g's header of
// block b 32 bytes a block from block 0's: the 32 lanes read 512 contiguous, 16-byte aligned bytes.
TEST(CudaIntLayout, WarpLoadsReadContiguousPieces) {
  for (DType dtype : kFormats) {
    const int64_t stride = 1024, rows = 24, blocks = stride / kIntBlockElems;
    const int64_t pieces = int_code_bytes(dtype) / kIntPieceBytes;
    const IntLayout layout = int_layout(dtype, stride);
    for (int64_t first = 0; first < rows; first += kIntGroupRows) {
      for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t v = 0; v < pieces; ++v) {
          const int64_t base = int_code_offset(layout, first, (b * pieces + v) * kIntPieceBytes);
          EXPECT_EQ(base % 16, 0);
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, c = lane % 4;
            const int64_t row = first + g;
            const int64_t walked = int_code_offset(layout, row, 16 * c) +
                                   (b * pieces + v) * kIntGroupRows * kIntPieceBytes;
            EXPECT_EQ(walked, base + 16 * lane) << dtype_name(dtype) << " lane " << lane;
            EXPECT_EQ(walked, int_code_offset(layout, row, (b * pieces + v) * 64 + 16 * c));
          }
        }
        for (int g = 0; g < kIntGroupRows; ++g) {
          EXPECT_EQ(int_header_offset(layout, first + g, 0) + b * kIntGroupRows * 4,
                    int_header_offset(layout, first + g, b));
          EXPECT_EQ(int_header_offset(layout, first + g, b),
                    int_header_offset(layout, first, b) + 4 * g);
        }
      }
    }
  }
}

}  // namespace
}  // namespace specd
