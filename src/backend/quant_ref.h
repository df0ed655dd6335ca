// Plain (scalar) dequantisation of ggml's block formats: the reference every kernel is tested
// against. Layouts and arithmetic follow ggml's dequantize_row_* functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace specd {

// Block layouts (little-endian, packed; sizes as dtype_block_bytes).
//   q8_0  [32]: f16 d, i8 qs[32]                                    y = d * q
//   q4_0  [32]: f16 d, u8 qs[16] (low nibbles = y[0..16))           y = d * (q - 8)
//   q4_1  [32]: f16 d, f16 m, u8 qs[16]                             y = d * q + m
//   q5_0  [32]: f16 d, u8 qh[4] (5th bits), u8 qs[16]               y = d * (q - 16)
//   q5_1  [32]: f16 d, f16 m, u8 qh[4], u8 qs[16]                   y = d * q + m
//   q4_k [256]: f16 d, f16 dmin, u8 scales[12] (8 x 6-bit scale and min), u8 qs[128]
//               sub-block j of 32: y = d * sc[j] * q - dmin * mn[j]
//   q5_k [256]: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
//   q6_k [256]: u8 ql[128], u8 qh[64], i8 scales[16], f16 d        y = d * sc[j] * (q - 32)
// specd's load-time formats (backend/quantize.h writes them):
//   int8 [128]: f32 d, i8 qs[128]                                   y = d * q
//   int4 [128]: f16 d, f16 m, u8 qs[64] (low nibbles = y[0..64))    y = d * q + m
// (int4: the product and the sum are two roundings, no fused multiply-add, on every backend.)
//
// Dequantises `n` elements (a whole number of blocks) starting at `src` into dst. Also accepts
// f32, f16 and bf16 (widening).
void dequantize_row(DType dtype, const void* src, int64_t n, float* dst);

// Byte offsets in a block of the f16 scale (d) and, where the format has one, min (m, dmin)
// fields: {0} for q8_0, q4_0, q5_0; {0, 2} for q4_1, q5_1, q4_k, q5_k; {208} for q6_k; {} else.
std::vector<size_t> block_half_offsets(DType dtype);

// The 6-bit scale and min of sub-block j (0..7) of a q4_k/q5_k block's scales[12].
inline void k_quant_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// All eight: the scales to out[0..7] and the mins to out[8..15], four sub-blocks per 32-bit word
// (each byte as k_quant_scale_min gives it; the words are read little-endian, as GGUF stores them).
inline void k_quant_scales_mins(const uint8_t* q, uint8_t out[16]) {
  uint32_t w[3];
  std::memcpy(w, q, 12);
  const uint32_t low6 = 0x3F3F3F3Fu, low4 = 0x0F0F0F0Fu, top2 = 0x03030303u;
  const uint32_t words[4] = {
      w[0] & low6,                                        // scales 0..3
      (w[2] & low4) | (((w[0] >> 6) & top2) << 4),        // scales 4..7
      w[1] & low6,                                        // mins 0..3
      ((w[2] >> 4) & low4) | (((w[1] >> 6) & top2) << 4)  // mins 4..7
  };
  std::memcpy(out, words, 16);
}

}  // namespace specd
