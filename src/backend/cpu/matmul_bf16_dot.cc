// Batch-invariant matmul for bf16 weights on x86 CPUs with AVX512-BF16 (vdpbf16ps), for every row
// count: decode, verification and prompts.
//
// x is rounded to bf16 once per product (pack_x_bf16), as bf16 inference engines do. One
// vdpbf16ps multiplies 32 weights by 32 x values and adds the 16 pair sums into 16 f32 lanes; a
// bf16 x bf16 product is exact in f32, so only the additions round, and it does the work of two
// f32 multiply-adds. Every (row m, column n) result is computed by the same sequence, whatever M,
// the tile or the thread's columns: acc = dp(acc, x, w) per 32-element chunk (the last one masked
// to k), a fixed horizontal sum of the 16 lanes (sum_lanes4), + bias, then y + result. Highway 1.0
// has no operation for vdpbf16ps, hence the intrinsics here.
#include <algorithm>

#include "backend/cpu/bf16_dot.h"
#include "backend/cpu/kernels.h"

namespace specd::cpu {

#ifdef SPECD_HAVE_BF16_DOT_CODE

namespace {

constexpr int64_t kChunk = 32;  // bf16 elements per vector
// Prefetches 1 KiB ahead in each weight row, into L2: into L1, 5-row products from DRAM took
// 1.16-1.25x the time. Tiles of kFarPrefetchRows rows or more, whose arithmetic takes longer per
// cache line, also prefetch kFarPrefetch times further: with the near prefetch alone their loads
// waited on DRAM (5-row forwards 4-19% slower). Smaller tiles keep the near one only: with both,
// one-row forwards were 1-8% slower and 2- and 3-row products in L2 20-30% slower.
constexpr int64_t kPrefetchElements = 512;
constexpr int64_t kFarPrefetch = 4;
constexpr int kFarPrefetchRows = 4;
constexpr int kMaxTileRows = 6;  // 6 x 4 accumulators + 4 weights + 1 x of 32 registers
constexpr int kTileCols = 4;
constexpr int64_t kBlockRows = 32;  // rows of x a pass over the columns reads (64 KiB at K = 1024)

// One chunk of k: acc[i][j] = dp(acc[i][j], x[i], w[j]). `valid` weights of the chunk are loaded
// (the rest are zero; x's padding is zero too).
template <int MR, int NR, bool kMasked>
SPECD_BF16_DOT __attribute__((always_inline)) inline void step(__m512 (&acc)[MR][NR],
                                                               const uint16_t* const (&w)[NR],
                                                               const uint16_t* const (&x)[MR],
                                                               int64_t c, int64_t ahead,
                                                               int64_t valid) {
  const int64_t k = c * kChunk;
  __m512bh wv[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    _mm_prefetch(reinterpret_cast<const char*>(w[j] + k + ahead), _MM_HINT_T1);
    if constexpr (MR >= kFarPrefetchRows) {
      _mm_prefetch(reinterpret_cast<const char*>(w[j] + k + kFarPrefetch * ahead), _MM_HINT_T1);
    }
    if constexpr (kMasked) {
      wv[j] = reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(first_lanes32(valid), w[j] + k));
    } else {
      wv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w[j] + k));
    }
    // Keeps the weights in registers: GCC 12 would load them again for each row of 2-3 row tiles.
    asm("" : "+v"(wv[j]));
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_load_si512(x[i] + k));
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
  }
}

// out[j] = the 16 lanes of v[j] summed by one fixed tree: lanes i and i + 8, then that sum and
// the one 4 lanes higher, then i and i ^ 2, then i and i ^ 1. The four sums share each step's
// shuffles and additions; out[j] depends only on v[j] (a lone accumulator is passed four times).
SPECD_BF16_DOT __attribute__((always_inline)) inline void sum_lanes4(const __m512 (&v)[4],
                                                                     float* out) {
  // [v0 blocks 0+2, 1+3 | v1 blocks 0+2, 1+3] and the same for v2, v3 (blocks of 4 lanes).
  const __m512 s01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], 0x44), _mm512_shuffle_f32x4(v[0], v[1], 0xEE));
  const __m512 s23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(v[2], v[3], 0x44), _mm512_shuffle_f32x4(v[2], v[3], 0xEE));
  // Block j: v[j]'s (0+2) + (1+3).
  const __m512 u =
      _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
  const __m512 t = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));  // i + (i ^ 2)
  const __m512 r = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));  // i + (i ^ 1)
  const __m512i first_lanes = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(first_lanes, r)));
}

// Rows [m0, m0 + MR) x columns n0 + j * n_step, j < NR. `next_rows`: an earlier row tile already
// brought these columns' weights into cache, so the prefetches fetch the next weight rows.
template <int MR, int NR>
SPECD_BF16_DOT void tile(const MatmulArgs& a, int64_t m0, int64_t n0, int64_t n_step,
                         bool next_rows) {
  static_assert(NR == 1 || NR == kTileCols, "column tiles of 1 or kTileCols (sum_lanes4)");
  const int64_t full = a.k / kChunk;
  const int64_t x_stride = bf16_x_stride(a.k);
  const uint16_t* w[NR];
  const uint16_t* x[MR];
  for (int j = 0; j < NR; ++j) {
    w[j] = static_cast<const uint16_t*>(a.w) + (n0 + j * n_step) * a.w_stride;
  }
  for (int i = 0; i < MR; ++i) x[i] = a.x_bf16 + (m0 + i) * x_stride;
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  const int64_t ahead = next_rows ? a.w_stride : kPrefetchElements;
  for (int64_t c = 0; c < full; ++c) step<MR, NR, false>(acc, w, x, c, ahead, kChunk);
  if (full * kChunk < a.k) {
    step<MR, NR, true>(acc, w, x, full, ahead, a.k - full * kChunk);
  }
  float bias[NR];
  for (int j = 0; j < NR; ++j) {
    bias[j] = a.bias != nullptr ? load_as_f32(a.bias, a.bias_dtype, n0 + j * n_step) : 0.0f;
  }
  for (int i = 0; i < MR; ++i) {
    float* y = a.y + (m0 + i) * a.y_stride + n0;
    float sums[kTileCols];
    if constexpr (NR == kTileCols) {
      sum_lanes4(acc[i], sums);
    } else {
      const __m512 same[4] = {acc[i][0], acc[i][0], acc[i][0], acc[i][0]};
      sum_lanes4(same, sums);
    }
    for (int j = 0; j < NR; ++j) {
      float r = sums[j];
      if (a.bias != nullptr) r = r + bias[j];
      float& out = y[j * n_step];
      out = a.accumulate ? out + r : r;
    }
  }
}

// Rows [m0, m0 + rows) of columns n0 + j * n_step, j < NR, as one tile of `rows` <= MR rows.
template <int NR, int MR = kMaxTileRows>
SPECD_BF16_DOT void tile_of(int64_t rows, const MatmulArgs& a, int64_t m0, int64_t n0,
                            int64_t n_step, bool next_rows) {
  if constexpr (MR > 1) {
    if (rows < MR) return tile_of<NR, MR - 1>(rows, a, m0, n0, n_step, next_rows);
  }
  tile<MR, NR>(a, m0, n0, n_step, next_rows);
}

// All rows of columns n0 + j * n_step, j < NR, in row tiles of at most kMaxTileRows, sized as
// evenly as possible, smaller ones first (the later tiles prefetch the next weight rows).
template <int NR>
SPECD_BF16_DOT void columns(const MatmulArgs& a, int64_t n0, int64_t n_step) {
  const int64_t tiles = (a.m + kMaxTileRows - 1) / kMaxTileRows;
  int64_t m0 = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t rows = (a.m - m0) / (tiles - t);
    tile_of<NR>(rows, a, m0, n0, n_step, t > 0);
    m0 += rows;
  }
}

// Splits [n_begin, n_end) into kTileCols equal runs walked side by side (kTileCols distant weight
// rows in flight), then the leftover columns one at a time.
SPECD_BF16_DOT void walk(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t run = (n_end - n_begin) / kTileCols;
  for (int64_t i = 0; i < run; ++i) columns<kTileCols>(a, n_begin + i, run);
  for (int64_t n = n_begin + kTileCols * run; n < n_end; ++n) columns<1>(a, n, 0);
}

SPECD_BF16_DOT void pack_x(const MatmulArgs& a, uint16_t* out) {
  const int64_t stride = bf16_x_stride(a.k);
  for (int64_t m = 0; m < a.m; ++m) {
    round_row_bf16(a.x + m * a.x_stride, a.k, out + m * stride);
  }
}

}  // namespace

bool have_bf16_dot() {
  static const bool have = __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512bf16");
  return have;
}

void pack_x_bf16(const MatmulArgs& a, uint16_t* out) { pack_x(a, out); }

// Rows in blocks of kBlockRows: a block's x (up to 192 KiB at K = 3072) stays in L2 while every
// column group of the range runs over it, and the range's weights stay in cache from block to
// block.
void matmul_bf16_dot(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const int64_t stride = bf16_x_stride(a.k);
  for (int64_t m0 = 0; m0 < a.m; m0 += kBlockRows) {
    MatmulArgs block = a;
    block.m = std::min(kBlockRows, a.m - m0);
    block.x_bf16 = a.x_bf16 + m0 * stride;
    block.y = a.y + m0 * a.y_stride;
    walk(block, n_begin, n_end);
  }
}

#else  // no AVX512-BF16 code on this architecture or compiler

bool have_bf16_dot() { return false; }
void pack_x_bf16(const MatmulArgs&, uint16_t*) {}
void matmul_bf16_dot(const MatmulArgs&, int64_t, int64_t) {}

#endif

}  // namespace specd::cpu
