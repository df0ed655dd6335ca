// Element types of weights, activations and caches, and scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace specd {

// kQ* are ggml's block-quantised formats, kept as stored in GGUF files: a row of n elements is
// n / dtype_block_elems blocks of dtype_block_bytes bytes (see backend/quant_ref.h).
// kInt8 and kInt4 are specd's load-time weight quantisation (--quantize): 128-element blocks of
// int8 with an f32 scale (one scale per output channel, repeated in each block) and of 4-bit
// codes with an f16 scale and min (asymmetric, group size 128).
enum class DType : uint8_t {
  kF32, kF16, kBF16, kI32,
  kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ4_K, kQ5_K, kQ6_K,
  kInt8, kInt4,
};

// Bytes of one element; throws specd::Error for block-quantised dtypes (use dtype_row_bytes).
size_t dtype_size(DType dtype);
bool is_quantized(DType dtype);
// Elements per block (1 for f32/f16/bf16/i32) and bytes per block.
int64_t dtype_block_elems(DType dtype);
size_t dtype_block_bytes(DType dtype);
// Bytes of `elems` consecutive elements (elems must be a whole number of blocks).
size_t dtype_row_bytes(DType dtype, int64_t elems);
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string ("F32", "BF16", ...); returns false if unknown.
bool parse_safetensors_dtype(std::string_view name, DType* out);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &wide, sizeof(out));
  return out;
}

// Round to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// value rounded to the nearest bf16 (ties to even), as float.
inline float round_to_bf16(float value) { return bf16_to_f32(f32_to_bf16(value)); }

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// Reads element `index` of a buffer of `dtype` as float (slow path for tests and tools).
float load_as_f32(const void* data, DType dtype, size_t index);
// Writes `value` into element `index` of a buffer of `dtype`.
void store_from_f32(void* data, DType dtype, size_t index, float value);

}  // namespace specd
