// Half-precision conversions against the processor's own F16C instructions and bit rules.
#include "core/dtype.h"

#include <gtest/gtest.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <random>

namespace specd {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

#if defined(__F16C__)
TEST(DType, F16ToF32MatchesF16cForAllValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float expected = _cvtsh_ss(static_cast<uint16_t>(h));
    float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(bits_of(expected), bits_of(got)) << "half bits " << h;
    }
  }
}

TEST(DType, F32ToF16MatchesF16cRoundToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t b = any(rng);
    // Concentrate on the f16 range half of the time.
    if (i % 2 == 0) b = (b & 0x807fffffu) | ((100u + (b >> 23) % 60u) << 23);
    float f;
    std::memcpy(&f, &b, 4);
    uint16_t expected = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
    uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      EXPECT_EQ(got & 0x7c00u, 0x7c00u);
      EXPECT_NE(got & 0x3ffu, 0u);
    } else {
      ASSERT_EQ(expected, got) << "f32 bits " << std::hex << b;
    }
  }
}

#endif  // __F16C__

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even mantissa.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, SafetensorsNames) {
  DType d;
  EXPECT_TRUE(parse_safetensors_dtype("BF16", &d));
  EXPECT_EQ(d, DType::kBF16);
  EXPECT_FALSE(parse_safetensors_dtype("F8_E4M3", &d));
  EXPECT_FALSE(parse_safetensors_dtype("bf16", &d));
}

}  // namespace
}  // namespace specd
