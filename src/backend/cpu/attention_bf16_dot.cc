// Attention over a bf16 KV cache with AVX512-BF16 dot products (vdpbf16ps), for every row count:
// decode, verification and prompts. The cache is read as it is, with no widening.
//
// Scores: the query is rounded to bf16 once (pack_query_bf16), as bf16 inference engines do. Each
// score is one sequence whatever the other keys or queries: acc = dp(acc, q, k) per 32-element
// chunk of head_dim (the last one masked), the 16 lanes summed by a fixed tree (lanes i and i + 8,
// then i + 4, i + 2, i + 1), times scale. Sixteen keys go through the tree together, each alike.
// Values: the softmax weights are rounded to bf16 (pack_weights_bf16) and p.V is summed in pairs
// of the row's list positions (k, k + 1), k even: one dp per pair and 32 elements of head_dim, on
// the two rows' elements interleaved. The pairs depend only on the row's list, so neither the
// blocks the caller walks nor the other rows change a row's sums. A bf16 x bf16 product is exact
// in f32; only the additions round (vdpbf16ps treats denormals as zero).
#include <algorithm>

#include "backend/cpu/bf16_dot.h"
#include "backend/cpu/kernels.h"
#include "core/error.h"

namespace specd::cpu {

#ifdef SPECD_HAVE_BF16_DOT_CODE

namespace {

constexpr int64_t kChunk = 32;  // bf16 elements per vector
constexpr int kGroup = 16;      // keys scored together: one output vector

// Lane L of sum_lanes16's result holds input slot slot_of_key(L): the tree below leaves slot s in
// lane (s % 4) * 4 + s / 4, a 4 x 4 transpose, which is its own inverse.
constexpr int slot_of_key(int key) { return (key % 4) * 4 + key / 4; }

// Lane slot_of_key(s) of the result = the 16 lanes of v[s] summed by the fixed tree. Every slot
// goes through the same additions, so a sum does not depend on its slot or on the others.
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

// Scores of keys [0, n) with n <= kGroup over C chunks of head_dim, the last one masked to `tail`
// elements (slots of missing keys read key 0; their lanes are not stored). Key by key, with the
// query's chunks in registers: one pointer live, where 16 of them spilled. Prefetches the keys
// `ahead` entries further on (below `limit` of them) when bytes > 0.
template <int C>
SPECD_BF16_DOT void score_group(const uint16_t* q, const uint16_t* keys, int64_t stride, int n,
                                int64_t tail, float scale, const KeyPrefetch& fetch, int64_t first,
                                float* scores) {
  if (fetch.bytes > 0) {
    const int64_t end = std::min<int64_t>(first + fetch.ahead + n, fetch.limit);
    for (int64_t e = first + fetch.ahead; e < end; ++e) {
      const char* line = reinterpret_cast<const char*>(keys + (e - first) * stride);
      for (int64_t b = 0; b < fetch.bytes; b += 64) _mm_prefetch(line + b, _MM_HINT_T0);
    }
  }
  const __mmask32 last = first_lanes32(tail);
  __m512bh qv[C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    qv[c] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + c * kChunk));
  }
  __m512 acc[kGroup];
#pragma GCC unroll 16
  for (int s = 0; s < kGroup; ++s) {
    const int k = slot_of_key(s);
    const uint16_t* key = keys + (k < n ? k : 0) * stride;
    acc[s] = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512i kv = c + 1 < C ? _mm512_loadu_si512(key + c * kChunk)
                                   : _mm512_maskz_loadu_epi16(last, key + c * kChunk);
      acc[s] = _mm512_dpbf16_ps(acc[s], qv[c], reinterpret_cast<__m512bh>(kv));
    }
  }
  const __m512 r = _mm512_mul_ps(sum_lanes16(acc), _mm512_set1_ps(scale));
  _mm512_mask_storeu_ps(scores, static_cast<__mmask16>((1u << n) - 1), r);
}

// score_group for every group of keys of [0, n), C chunks.
template <int C>
SPECD_BF16_DOT void score_groups(const uint16_t* q, const uint16_t* keys, int64_t stride, int64_t n,
                                 int64_t tail, float scale, const KeyPrefetch& fetch, int64_t first,
                                 float* scores) {
  for (int64_t j = 0; j < n; j += kGroup) {
    const int count = static_cast<int>(std::min<int64_t>(kGroup, n - j));
    score_group<C>(q, keys + j * stride, stride, count, tail, scale, fetch, first + j, scores + j);
  }
}

// acc[2c], acc[2c + 1] += the dim chunk c of pair weights `pair` times rows a and b (bf16 pairs:
// a's element, then b's, in each 32-bit lane), for C chunks from `dim`; b == nullptr is a row of
// zeros. The last chunk is masked to `tail` elements when tail < kChunk.
template <int C>
SPECD_BF16_DOT __attribute__((always_inline)) inline void value_pair(__m512 (&acc)[2 * C],
                                                                     __m512bh pair,
                                                                     const uint16_t* a,
                                                                     const uint16_t* b, int64_t dim,
                                                                     int64_t tail) {
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    const int64_t d = dim + c * kChunk;
    const __mmask32 mask = first_lanes32(c + 1 < C ? kChunk : tail);
    const __m512i va = _mm512_maskz_loadu_epi16(mask, a + d);
    const __m512i vb =
        b != nullptr ? _mm512_maskz_loadu_epi16(mask, b + d) : _mm512_setzero_si512();
    // Per 128-bit block: elements 0-3 of a and b interleaved, then elements 4-7.
    acc[2 * c] = _mm512_dpbf16_ps(acc[2 * c], pair,
                                  reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(va, vb)));
    acc[2 * c + 1] = _mm512_dpbf16_ps(acc[2 * c + 1], pair,
                                      reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(va, vb)));
  }
}

// value_pair over the pairs (k, k + 1) for even k in [k_begin, k_end), C chunks from `dim`.
template <int C>
SPECD_BF16_DOT void value_pairs(const uint16_t* weights, const int32_t* entries, int64_t k_begin,
                                int64_t k_end, int64_t n, const uint16_t* values, int64_t stride,
                                int64_t dim, int64_t tail, float* acc_out) {
  __m512 acc[2 * C];
#pragma GCC unroll 8
  for (int i = 0; i < 2 * C; ++i) acc[i] = _mm512_loadu_ps(acc_out + (dim * 2 / kChunk + i) * 16);
  for (int64_t k = k_begin; k < k_end; k += 2) {
    uint32_t bits;
    __builtin_memcpy(&bits, weights + k, sizeof(bits));
    if (k + 1 == n) bits &= 0xFFFFu;  // the last entry alone: its partner weighs 0
    const __m512bh pair = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(bits)));
    const uint16_t* a = values + entries[k] * stride;
    const uint16_t* b = k + 1 < n ? values + entries[k + 1] * stride : nullptr;
    value_pair<C>(acc, pair, a, b, dim, tail);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 2 * C; ++i) _mm512_storeu_ps(acc_out + (dim * 2 / kChunk + i) * 16, acc[i]);
}

}  // namespace

SPECD_BF16_DOT void pack_weights_bf16(float* p, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(p);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t valid = std::min<int64_t>(n - i, 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    const __m256i packed =
        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, p + i)));
    _mm256_mask_storeu_epi16(out + i, mask, packed);  // behind the floats still to be read
  }
}

SPECD_BF16_DOT void attention_values_bf16(const uint16_t* weights, const int32_t* entries,
                                          int64_t k_begin, int64_t k_end, int64_t n,
                                          const uint16_t* values, int64_t stride, int64_t head_dim,
                                          float* acc) {
  k_begin += k_begin & 1;  // a pair that began in the last call was summed there
  if (k_begin >= k_end) return;
  const int64_t chunks = (head_dim + kChunk - 1) / kChunk;
  for (int64_t c = 0; c < chunks; c += 4) {
    const int64_t dim = c * kChunk;
    const int64_t tail = head_dim - (std::min<int64_t>(c + 4, chunks) - 1) * kChunk;
    switch (std::min<int64_t>(4, chunks - c)) {
      case 4:
        value_pairs<4>(weights, entries, k_begin, k_end, n, values, stride, dim, tail, acc);
        break;
      case 3:
        value_pairs<3>(weights, entries, k_begin, k_end, n, values, stride, dim, tail, acc);
        break;
      case 2:
        value_pairs<2>(weights, entries, k_begin, k_end, n, values, stride, dim, tail, acc);
        break;
      default:
        value_pairs<1>(weights, entries, k_begin, k_end, n, values, stride, dim, tail, acc);
        break;
    }
  }
}

SPECD_BF16_DOT void attention_values_bf16_finish(const float* acc, int64_t head_dim, float inv,
                                                 float* out) {
  // acc chunk c: vector 2c lane 4j + t holds dim 32c + 8j + t, vector 2c + 1 dim 32c + 8j + 4 + t.
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  const __m512 scale = _mm512_set1_ps(inv);
  for (int64_t d = 0; d < head_dim; d += kChunk) {
    const __m512 lo = _mm512_loadu_ps(acc + d), hi = _mm512_loadu_ps(acc + d + 16);
    const __m512 out0 = _mm512_mul_ps(_mm512_permutex2var_ps(lo, first, hi), scale);
    const __m512 out1 = _mm512_mul_ps(_mm512_permutex2var_ps(lo, second, hi), scale);
    const int64_t valid = std::min<int64_t>(head_dim - d, kChunk);
    _mm512_mask_storeu_ps(out + d, static_cast<__mmask16>((1u << std::min<int64_t>(valid, 16)) - 1),
                          out0);
    if (valid > 16) {
      _mm512_mask_storeu_ps(out + d + 16, static_cast<__mmask16>((1u << (valid - 16)) - 1), out1);
    }
  }
}

SPECD_BF16_DOT void pack_query_bf16(const float* q, int64_t head_dim, uint16_t* out) {
  round_row_bf16(q, head_dim, out);
}

void attention_scores_bf16(const uint16_t* q, const uint16_t* keys, int64_t stride, int64_t n,
                           int64_t head_dim, float scale, const KeyPrefetch& fetch, int64_t first,
                           float* scores) {
  const int64_t chunks = (head_dim + kChunk - 1) / kChunk;
  const int64_t tail = head_dim - (chunks - 1) * kChunk;
  switch (chunks) {
#define SPECD_SCORE_CASE(C) \
  case C:                   \
    return score_groups<C>(q, keys, stride, n, tail, scale, fetch, first, scores);
    SPECD_SCORE_CASE(1)
    SPECD_SCORE_CASE(2)
    SPECD_SCORE_CASE(3)
    SPECD_SCORE_CASE(4)
    SPECD_SCORE_CASE(5)
    SPECD_SCORE_CASE(6)
    SPECD_SCORE_CASE(7)
    SPECD_SCORE_CASE(8)
#undef SPECD_SCORE_CASE
    default:
      SPECD_CHECK(false, "attention: head_dim {} > {} on the AVX512-BF16 path", head_dim,
                  kMaxBf16DotHeadDim);
  }
}

#else  // no AVX512-BF16 code on this architecture or compiler

void pack_query_bf16(const float*, int64_t, uint16_t*) {}
void pack_weights_bf16(float*, int64_t) {}
void attention_values_bf16(const uint16_t*, const int32_t*, int64_t, int64_t, int64_t,
                           const uint16_t*, int64_t, int64_t, float*) {}
void attention_values_bf16_finish(const float*, int64_t, float, float*) {}
void attention_scores_bf16(const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, float,
                           const KeyPrefetch&, int64_t, float*) {}

#endif

}  // namespace specd::cpu
