// Setup and helpers shared by the AVX512-BF16 kernels (matmul_bf16_dot.cc, attention_bf16_dot.cc):
// the intrinsics where the architecture and compiler have them, the target attribute of their
// functions, lane masks and rounding a row to bf16. Include it from those .cc files only (it sets
// diagnostic pragmas).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SPECD_HAVE_BF16_DOT_CODE 1

// GCC 12 warns about the intrinsics' own deliberately undefined vectors (_mm512_undefined_*).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define SPECD_BF16_DOT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

#include <algorithm>
#include <cstdint>

namespace specd::cpu {

// A mask of the first `valid` of 32 bf16 lanes (all of them from 32 on).
SPECD_BF16_DOT inline __mmask32 first_lanes32(int64_t valid) {
  return valid >= 32 ? static_cast<__mmask32>(~0u)
                     : static_cast<__mmask32>((uint64_t{1} << valid) - 1);
}

// x[0, k) rounded to bf16 (ties to even) into out, zero-padded to a multiple of 32 elements.
SPECD_BF16_DOT inline void round_row_bf16(const float* x, int64_t k, uint16_t* out) {
  const int64_t padded = (k + 31) / 32 * 32;
  for (int64_t i = 0; i < padded; i += 16) {
    const int64_t valid = std::clamp<int64_t>(k - i, 0, 16);
    const __m512 v =
        _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << valid) - 1), x + std::min(i, k));
    const __m256i packed = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
}

}  // namespace specd::cpu
#endif
