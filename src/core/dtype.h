// Element types of weights, activations and caches, and scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace specd {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32 };

size_t dtype_size(DType dtype);
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

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// Reads element `index` of a buffer of `dtype` as float (slow path for tests and tools).
float load_as_f32(const void* data, DType dtype, size_t index);
// Writes `value` into element `index` of a buffer of `dtype`.
void store_from_f32(void* data, DType dtype, size_t index, float value);

}  // namespace specd
