// Load-time weight quantisation (--quantize int8|int4): float rows into specd's int8 and int4
// block formats (layouts in backend/quant_ref.h, which holds their dequantisation).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace specd {

enum class WeightQuant : uint8_t { kNone, kInt8, kInt4 };

// Parses "none", "int8" or "int4"; throws specd::Error naming the choices otherwise.
WeightQuant parse_weight_quant(std::string_view text);
std::string_view weight_quant_name(WeightQuant quant);
// The block dtype a mode writes (kInt8 or kInt4); the source dtype for kNone.
DType weight_quant_dtype(WeightQuant quant, DType source);
// True if a [rows, cols] weight of `source` dtype can be quantised: a float dtype (f32, f16,
// bf16) and cols a whole number of 128-element blocks.
bool can_quantize(DType source, int64_t cols);

// Quantises one row of `cols` elements of `src` (f32, f16 or bf16) into `dst`
// (dtype_row_bytes(kInt8, cols) bytes). Symmetric per row (= per output channel):
//   d = max|w| / 127, q = clamp(round_half_even(w / d), -127, 127)   (d = 0, q = 0 for a zero row)
// Every block of the row carries the same d. All arithmetic is f32, as numpy evaluates it.
void quantize_row_int8(const void* src, DType src_dtype, int64_t cols, uint8_t* dst);

// Quantises one row into kInt4 blocks (dtype_row_bytes(kInt4, cols) bytes). Asymmetric per
// group of 128: d = f16((max - min) / 15), m = f16(min), and with those stored (rounded) values
// q = clamp(round_half_even((w - m) / d), 0, 15)  (q = 0 where d is 0).
void quantize_row_int4(const void* src, DType src_dtype, int64_t cols, uint8_t* dst);

// Quantises `rows` rows (row stride `cols`) into `dtype` (kInt8 or kInt4).
void quantize_rows(DType dtype, const void* src, DType src_dtype, int64_t rows, int64_t cols,
                   uint8_t* dst);

}  // namespace specd
