// Attention scores over a bf16 KV cache with AVX512-BF16 dot products (vdpbf16ps), for every row
// count: decode, verification and prompts.
//
// The query is rounded to bf16 once (pack_query_bf16), as bf16 inference engines do; the keys are
// read from the cache as they are, with no widening. Each score is computed by one sequence,
// whatever the other keys or queries: acc = dp(acc, q, k) per 32-element chunk of head_dim (the
// last one masked), the 16 lanes summed by a fixed tree (lanes i and i + 8, then i and i + 4,
// i + 2, i + 1), times scale. Sixteen keys share each step of that tree, so a score costs a
// quarter of a vector per 32 elements of head_dim plus an eighth of a shuffle-and-add step, where
// f32 multiply-adds on widened keys took two vectors and a horizontal sum of its own.
#include <algorithm>

#include "backend/cpu/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SPECD_HAVE_BF16_DOT_CODE 1
#endif

namespace specd::cpu {

#ifdef SPECD_HAVE_BF16_DOT_CODE

// GCC 12 warns about the intrinsics' own deliberately undefined vectors (_mm512_undefined_*).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define SPECD_BF16_DOT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

constexpr int64_t kChunk = 32;  // bf16 elements per vector
constexpr int kGroup = 16;      // keys scored together: one output vector

// Lane L of sum_lanes16's result holds input slot slot_of_key(L): the tree below leaves slot s in
// lane (s % 4) * 4 + s / 4, a 4 x 4 transpose, which is its own inverse.
constexpr int slot_of_key(int key) { return (key % 4) * 4 + key / 4; }

// Lane slot_of_key^-1(s) of the result = the 16 lanes of v[s] summed by the fixed tree. Every
// slot goes through the same additions, so a sum does not depend on its slot or on the others.
SPECD_BF16_DOT __attribute__((always_inline)) inline __m512 sum_lanes16(const __m512 (&v)[kGroup]) {
  // Lanes 0-7: v[2p] lanes i + (i + 8); lanes 8-15: the same for v[2p + 1].
  __m512 s[8];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
  }
  // Block (of 4 lanes) j of t[p] = slot 4p + j: its lanes i + (i + 4).
  __m512 t[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], 0xDD));
  }
  // Block j of u[p]: lanes 0-1 slot 8p + j, lanes 2-3 slot 8p + 4 + j; each i + (i + 2).
  __m512 u[2];
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
    u[p] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * p], t[2 * p + 1], 0x44),
                         _mm512_shuffle_ps(t[2 * p], t[2 * p + 1], 0xEE));
  }
  // Block j: slots j, 4 + j, 8 + j, 12 + j; each i + (i + 1).
  return _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
}

// Scores of keys [0, n) with n <= kGroup (slots of missing keys read key 0; their lanes are not
// stored). Prefetches the keys `ahead` entries further on (below `limit` of them) when bytes > 0.
SPECD_BF16_DOT void score_group(const uint16_t* q, const uint16_t* keys, int64_t stride, int n,
                                int64_t head_dim, float scale, const KeyPrefetch& fetch,
                                int64_t first, float* scores) {
  const uint16_t* key[kGroup];
#pragma GCC unroll 16
  for (int s = 0; s < kGroup; ++s) {
    const int k = slot_of_key(s);
    key[s] = keys + (k < n ? k : 0) * stride;
  }
  if (fetch.bytes > 0) {
    const int64_t end = std::min<int64_t>(first + fetch.ahead + n, fetch.limit);
    for (int64_t e = first + fetch.ahead; e < end; ++e) {
      const char* line = reinterpret_cast<const char*>(keys + (e - first) * stride);
      for (int64_t b = 0; b < fetch.bytes; b += 64) _mm_prefetch(line + b, _MM_HINT_T0);
    }
  }
  __m512 acc[kGroup];
#pragma GCC unroll 16
  for (int s = 0; s < kGroup; ++s) acc[s] = _mm512_setzero_ps();
  const int64_t full = head_dim / kChunk;
  for (int64_t c = 0; c < full; ++c) {
    const __m512bh qv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + c * kChunk));
#pragma GCC unroll 16
    for (int s = 0; s < kGroup; ++s) {
      const __m512bh kv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(key[s] + c * kChunk));
      acc[s] = _mm512_dpbf16_ps(acc[s], qv, kv);
    }
  }
  if (full * kChunk < head_dim) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (head_dim - full * kChunk)) - 1);
    const __m512bh qv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + full * kChunk));
#pragma GCC unroll 16
    for (int s = 0; s < kGroup; ++s) {
      const __m512bh kv =
          reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, key[s] + full * kChunk));
      acc[s] = _mm512_dpbf16_ps(acc[s], qv, kv);
    }
  }
  const __m512 r = _mm512_mul_ps(sum_lanes16(acc), _mm512_set1_ps(scale));
  _mm512_mask_storeu_ps(scores, static_cast<__mmask16>((1u << n) - 1), r);
}

}  // namespace

SPECD_BF16_DOT void pack_query_bf16(const float* q, int64_t head_dim, uint16_t* out) {
  const int64_t padded = bf16_x_stride(head_dim);
  for (int64_t i = 0; i < padded; i += 16) {
    const int64_t valid = std::clamp<int64_t>(head_dim - i, 0, 16);
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << valid) - 1), q + i);
    const __m256i packed = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));  // ties to even
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
}

void attention_scores_bf16(const uint16_t* q, const uint16_t* keys, int64_t stride, int64_t n,
                           int64_t head_dim, float scale, const KeyPrefetch& fetch, int64_t first,
                           float* scores) {
  for (int64_t j = 0; j < n; j += kGroup) {
    const int count = static_cast<int>(std::min<int64_t>(kGroup, n - j));
    score_group(q, keys + j * stride, stride, count, head_dim, scale, fetch, first + j, scores + j);
  }
}

#else  // no AVX512-BF16 code on this architecture or compiler

void pack_query_bf16(const float*, int64_t, uint16_t*) {}
void attention_scores_bf16(const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, float,
                           const KeyPrefetch&, int64_t, float*) {}

#endif

}  // namespace specd::cpu
