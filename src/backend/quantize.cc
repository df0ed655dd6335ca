// Weight quantisers for the int8 (per output channel) and int4 (group 128, asymmetric) formats.
#include "backend/quantize.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace specd {

namespace {

constexpr int64_t kBlock = 128;

void widen(const void* src, DType dtype, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(src, dtype, static_cast<size_t>(i));
}

// Round half to even, as numpy.rint and torch.round (the default FE_TONEAREST mode).
float round_even(float v) { return std::nearbyint(v); }

float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

}  // namespace

WeightQuant parse_weight_quant(std::string_view text) {
  if (text == "none") return WeightQuant::kNone;
  if (text == "int8") return WeightQuant::kInt8;
  if (text == "int4") return WeightQuant::kInt4;
  fail("invalid quantisation '{}' (expected none, int8 or int4)", text);
}

std::string_view weight_quant_name(WeightQuant quant) {
  switch (quant) {
    case WeightQuant::kNone:
      return "none";
    case WeightQuant::kInt8:
      return "int8";
    case WeightQuant::kInt4:
      return "int4";
  }
  return "?";
}

DType weight_quant_dtype(WeightQuant quant, DType source) {
  switch (quant) {
    case WeightQuant::kInt8:
      return DType::kInt8;
    case WeightQuant::kInt4:
      return DType::kInt4;
    default:
      return source;
  }
}

bool can_quantize(DType source, int64_t cols) {
  const bool is_float = source == DType::kF32 || source == DType::kF16 || source == DType::kBF16;
  return is_float && cols > 0 && cols % kBlock == 0;
}

void quantize_row_int8(const void* src, DType src_dtype, int64_t cols, uint8_t* dst) {
  SPECD_CHECK(can_quantize(src_dtype, cols), "int8 quantisation: {} row of {} elements",
              dtype_name(src_dtype), cols);
  std::vector<float> w(static_cast<size_t>(cols));
  widen(src, src_dtype, cols, w.data());
  float amax = 0.0f;
  for (float v : w) {
    SPECD_CHECK(std::isfinite(v), "int8 quantisation: the weight holds {}", v);
    amax = std::max(amax, std::fabs(v));
  }
  const float d = amax / 127.0f;
  for (int64_t b = 0; b < cols / kBlock; ++b) {
    uint8_t* block = dst + b * dtype_block_bytes(DType::kInt8);
    std::memcpy(block, &d, 4);
    for (int64_t j = 0; j < kBlock; ++j) {
      const float v = w[static_cast<size_t>(b * kBlock + j)];
      const float q = d == 0.0f ? 0.0f : clampf(round_even(v / d), -127.0f, 127.0f);
      block[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void quantize_row_int4(const void* src, DType src_dtype, int64_t cols, uint8_t* dst) {
  SPECD_CHECK(can_quantize(src_dtype, cols), "int4 quantisation: {} row of {} elements",
              dtype_name(src_dtype), cols);
  std::vector<float> w(static_cast<size_t>(cols));
  widen(src, src_dtype, cols, w.data());
  for (int64_t b = 0; b < cols / kBlock; ++b) {
    const float* g = w.data() + b * kBlock;
    float lo = g[0], hi = g[0];
    for (int64_t j = 0; j < kBlock; ++j) {
      SPECD_CHECK(std::isfinite(g[j]), "int4 quantisation: the weight holds {}", g[j]);
      lo = std::min(lo, g[j]);
      hi = std::max(hi, g[j]);
    }
    SPECD_CHECK(std::fabs(lo) <= 65504.0f && std::fabs(hi) <= 65504.0f,
                "int4 quantisation: weights beyond the f16 range ({} .. {})", lo, hi);
    const uint16_t d16 = f32_to_f16((hi - lo) / 15.0f), m16 = f32_to_f16(lo);
    const float d = f16_to_f32(d16), m = f16_to_f32(m16);
    uint8_t* block = dst + b * dtype_block_bytes(DType::kInt4);
    std::memcpy(block, &d16, 2);
    std::memcpy(block + 2, &m16, 2);
    uint8_t codes[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) {
      codes[j] = d == 0.0f ? 0 : static_cast<uint8_t>(clampf(round_even((g[j] - m) / d), 0, 15));
    }
    for (int64_t j = 0; j < kBlock / 2; ++j) {
      block[4 + j] = static_cast<uint8_t>(codes[j] | (codes[j + kBlock / 2] << 4));
    }
  }
}

void quantize_rows(DType dtype, const void* src, DType src_dtype, int64_t rows, int64_t cols,
                   uint8_t* dst) {
  SPECD_CHECK(dtype == DType::kInt8 || dtype == DType::kInt4, "quantize_rows: {} is not int8/int4",
              dtype_name(dtype));
  const size_t src_row = static_cast<size_t>(cols) * dtype_size(src_dtype);
  const size_t dst_row = dtype_row_bytes(dtype, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const void* s = static_cast<const char*>(src) + r * src_row;
    if (dtype == DType::kInt8) {
      quantize_row_int8(s, src_dtype, cols, dst + r * dst_row);
    } else {
      quantize_row_int4(s, src_dtype, cols, dst + r * dst_row);
    }
  }
}

}  // namespace specd
