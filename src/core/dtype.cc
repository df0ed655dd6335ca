// Element-type names, sizes and the IEEE half-precision conversions.
#include "core/dtype.h"

#include "core/error.h"

namespace specd {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    default: break;
  }
  fail("dtype_size: {} is block-quantised and has no per-element size", dtype_name(dtype));
}

bool is_quantized(DType dtype) { return dtype_block_elems(dtype) > 1; }

int64_t dtype_block_elems(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1: return 32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return 256;
    case DType::kInt8:
    case DType::kInt4: return 128;
    default: return 1;
  }
}

size_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return 34;
    case DType::kQ4_0: return 18;
    case DType::kQ4_1: return 20;
    case DType::kQ5_0: return 22;
    case DType::kQ5_1: return 24;
    case DType::kQ4_K: return 144;
    case DType::kQ5_K: return 176;
    case DType::kQ6_K: return 210;
    case DType::kInt8: return 132;
    case DType::kInt4: return 68;
    default: return dtype_size(dtype);
  }
}

size_t dtype_row_bytes(DType dtype, int64_t elems) {
  const int64_t block = dtype_block_elems(dtype);
  SPECD_CHECK(elems >= 0 && elems % block == 0, "{} elements of {} are not whole blocks of {}",
              elems, dtype_name(dtype), block);
  return static_cast<size_t>(elems / block) * dtype_block_bytes(dtype);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kInt8: return "int8";
    case DType::kInt4: return "int4";
  }
  return "?";
}

bool parse_safetensors_dtype(std::string_view name, DType* out) {
  if (name == "F32") *out = DType::kF32;
  else if (name == "F16") *out = DType::kF16;
  else if (name == "BF16") *out = DType::kBF16;
  else if (name == "I32") *out = DType::kI32;
  else return false;
  return true;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;        // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;       // overflow to inf (incl. rounding)
  if (abs < 0x38800000u) {                             // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;                // rounds to zero
    uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);    // 14..24
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

float load_as_f32(const void* data, DType dtype, size_t index) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(data)[index];
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[index]);
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[index]);
    case DType::kI32: return static_cast<float>(static_cast<const int32_t*>(data)[index]);
    default: break;
  }
  fail("load_as_f32: {} is block-quantised", dtype_name(dtype));
}

void store_from_f32(void* data, DType dtype, size_t index, float value) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(data)[index] = value; return;
    case DType::kF16: static_cast<uint16_t*>(data)[index] = f32_to_f16(value); return;
    case DType::kBF16: static_cast<uint16_t*>(data)[index] = f32_to_bf16(value); return;
    case DType::kI32: static_cast<int32_t*>(data)[index] = static_cast<int32_t>(value); return;
    default: break;
  }
  fail("store_from_f32: {} is block-quantised", dtype_name(dtype));
}

}  // namespace specd
