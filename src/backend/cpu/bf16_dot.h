// Setup shared by the AVX512-BF16 kernels (matmul_bf16_dot.cc, attention_bf16_dot.cc): the
// intrinsics where the architecture and compiler have them, and the target attribute of their
// functions. Include it from those .cc files only (it sets diagnostic pragmas).
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
#endif
