// Batch-invariant small-M matmul (M <= 64 rows): streams each weight row once for all rows.
//
// Every (row m, column n) result is computed by the same sequence of operations, whatever M,
// the tile it falls in or the thread's column range: one vector accumulator of f32 lanes over
// k = 0, L, 2L, ... (L = lanes of the target), acc = w * x + acc, then the fixed horizontal sum
// of SumOfLanes4, plus a scalar sum of the k % L tail elements, then + bias, then y + result.
// bf16 weights take 2L elements per step instead (TileBf16: even elements, then odd ones, on x
// pre-split to match), with the same structure. Rows and columns are grouped in register tiles
// (MR rows x NR columns) only to reuse each widened weight vector across rows and each x vector
// across columns.
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/matmul_small.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/highway.h"
//
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Register tiles: columns per tile, and rows per tile when M > 1.
#if HWY_TARGET <= HWY_AVX3
constexpr int kTileCols = 4;  // 32 vector registers
constexpr int kTileRows = 4;
#else
constexpr int kTileCols = 3;  // 16 vector registers: 12 accumulators + 3 weights + 1 x
constexpr int kTileRows = 4;
#endif
constexpr int kDecodeCols = 3;  // columns per tile when M == 1 (3 streams: measured best)
// Software prefetch distance in each weight row (hardware prefetch alone leaves DRAM idle).
constexpr int64_t kPrefetchBytes = 1024;

// The end of a tile: horizontal sums of the accumulators (four at a time, padded with repeats of
// the last one), the scalar sum of the tail elements k_vec..k, bias, and the store into y.
// `x` and `x_stride`: the rows the tail elements are read from.
template <int MR, int NR, typename W, typename V>
HWY_INLINE void Finish(const MatmulArgs& a, int64_t m0, int64_t n0, int64_t n_step,
                       const V (&acc)[MR][NR], int64_t k_vec, const W* const (&w)[NR],
                       const float* x_rows, int64_t x_stride) {
  const hn::ScalableTag<float> d;
  constexpr int kCount = MR * NR;
  const V* flat = &acc[0][0];
  float sums[(kCount + 3) / 4 * 4];
  for (int g = 0; g < kCount; g += 4) {
    SumOfLanes4(d, flat[g], flat[HWY_MIN(g + 1, kCount - 1)], flat[HWY_MIN(g + 2, kCount - 1)],
                flat[HWY_MIN(g + 3, kCount - 1)], sums + g);
  }
  float bias[NR];
  for (int j = 0; j < NR; ++j) {
    bias[j] = a.bias != nullptr ? load_as_f32(a.bias, a.bias_dtype, n0 + j * n_step) : 0.0f;
  }
  for (int i = 0; i < MR; ++i) {
    const float* x = x_rows + (m0 + i) * x_stride;
    float* y = a.y + (m0 + i) * a.y_stride + n0;
    for (int j = 0; j < NR; ++j) {
      float r = sums[i * NR + j];
      if (k_vec < a.k) {
        float tail = 0.0f;
        for (int64_t k = k_vec; k < a.k; ++k) tail += x[k] * WidenScalar(w[j][k]);
        r = r + tail;
      }
      if (a.bias != nullptr) r = r + bias[j];
      float& out = y[j * n_step];
      out = a.accumulate ? out + r : r;
    }
  }
}

// Computes rows [m0, m0 + MR) x columns n0 + j * n_step for j < NR. `next_rows`: an earlier row
// tile already brought these columns' weights into cache, so the prefetches fetch the next
// weight rows instead (the walk's next columns), keeping DRAM busy while this tile computes.
template <int MR, int NR, typename W>
HWY_INLINE void Tile(const MatmulArgs& a, int64_t m0, int64_t n0, int64_t n_step, bool next_rows) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k_vec = a.k - a.k % lanes;
  const W* w[NR];
  const float* x[MR];
  for (int j = 0; j < NR; ++j) w[j] = static_cast<const W*>(a.w) + (n0 + j * n_step) * a.w_stride;
  for (int i = 0; i < MR; ++i) x[i] = a.x + (m0 + i) * a.x_stride;
  V acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = hn::Zero(d);
  }
  // One k step: acc[i][j] = w[j][k..] * x[i][k..] + acc[i][j].
  auto step = [&](int64_t k) HWY_ATTR {
    V wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = LoadWidened(d, w[j] + k);
    for (int i = 0; i < MR; ++i) {
      const V xv = hn::LoadU(d, x[i] + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = hn::MulAdd(wv[j], xv, acc[i][j]);
    }
  };
  // Steps per 64-byte line of weights, with one prefetch per weight row and line (prefetches do
  // not change the arithmetic).
  constexpr int64_t kLineSteps = HWY_MAX(1, 64 / static_cast<int64_t>(hn::MaxLanes(d) * sizeof(W)));
  constexpr int64_t kAhead = kPrefetchBytes / static_cast<int64_t>(sizeof(W));
  const int64_t ahead = next_rows ? a.w_stride : kAhead;
  int64_t k = 0;
  for (; k + kLineSteps * lanes <= k_vec; k += kLineSteps * lanes) {
    for (int j = 0; j < NR; ++j) hwy::Prefetch(w[j] + k + ahead);
    for (int64_t u = 0; u < kLineSteps; ++u) step(k + u * lanes);
  }
  for (; k < k_vec; k += lanes) step(k);
  Finish<MR, NR>(a, m0, n0, n_step, acc, k_vec, w, a.x, a.x_stride);
}

// bf16 weights, 2L elements per step (L = f32 lanes): read as L u32 words, the even elements are
// word << 16 and the odd ones word & 0xFFFF0000 (two bit operations widen 2L weights), and x is
// pre-split by SplitX so that each chunk of 2L elements holds its L even elements, then its L odd
// ones. Every (row m, column n) result: one vector accumulator over the chunks, acc = w_even *
// x_even + acc, then acc = w_odd * x_odd + acc; the fixed horizontal sum of SumOfLanes4; a scalar
// sum of the k % 2L tail; + bias; y + result. Little-endian layout (x86-64, Arm). `next_rows` as
// for Tile.
template <int MR, int NR>
HWY_INLINE void TileBf16(const MatmulArgs& a, int64_t m0, int64_t n0, int64_t n_step,
                         bool next_rows) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k_vec = a.k - a.k % (2 * lanes);
  const hwy::bfloat16_t* w[NR];
  const float* xs[MR];
  for (int j = 0; j < NR; ++j) {
    w[j] = static_cast<const hwy::bfloat16_t*>(a.w) + (n0 + j * n_step) * a.w_stride;
  }
  for (int i = 0; i < MR; ++i) xs[i] = a.x_split + (m0 + i) * split_x_stride(a.k);
  V acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = hn::Zero(d);
  }
  const auto high_half = hn::Set(du, 0xFFFF0000u);
  // One half of a chunk at a time (even elements, then odd ones): NR widened weight vectors and
  // one x vector live beside the accumulators.
  auto half_step = [&](int64_t k, bool odd) HWY_ATTR {
    V wv[NR];
    for (int j = 0; j < NR; ++j) {
      const auto words = hn::LoadU(du, reinterpret_cast<const uint32_t*>(w[j] + k));
      wv[j] = hn::BitCast(d, odd ? hn::And(words, high_half) : hn::ShiftLeft<16>(words));
    }
    for (int i = 0; i < MR; ++i) {
      const V xv = hn::LoadU(d, xs[i] + k + (odd ? lanes : 0));
      for (int j = 0; j < NR; ++j) acc[i][j] = hn::MulAdd(wv[j], xv, acc[i][j]);
    }
  };
  auto step = [&](int64_t k) HWY_ATTR {
    half_step(k, false);
    half_step(k, true);
  };
  // Steps per 64-byte line of weights, with one prefetch per weight row and line.
  constexpr int64_t kLineSteps = HWY_MAX(1, 64 / static_cast<int64_t>(hn::MaxLanes(d) * 4));
  constexpr int64_t kAhead = kPrefetchBytes / 2;
  const int64_t ahead = next_rows ? a.w_stride : kAhead;
  int64_t k = 0;
  for (; k + kLineSteps * 2 * lanes <= k_vec; k += kLineSteps * 2 * lanes) {
    for (int j = 0; j < NR; ++j) hwy::Prefetch(w[j] + k + ahead);
    for (int64_t u = 0; u < kLineSteps; ++u) step(k + u * 2 * lanes);
  }
  for (; k < k_vec; k += 2 * lanes) step(k);
  Finish<MR, NR>(a, m0, n0, n_step, acc, k_vec, w, a.x_split, split_x_stride(a.k));
}

// All rows of bf16 columns n0 + j * n_step, j < NR: row tiles of at most max_rows (<= 5) rows,
// sized as evenly as possible, smaller ones first (M = 5: 2 + 3 rows), so that the later tiles,
// which prefetch the next weight rows, last longer (0-5% faster at 5 rows than 3 + 2).
template <int NR>
HWY_INLINE void ColumnsBf16(const MatmulArgs& a, int64_t n0, int64_t n_step, int64_t max_rows) {
  const int64_t tiles = (a.m + max_rows - 1) / max_rows;
  int64_t m0 = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t rows = (a.m - m0) / (tiles - t);
    const bool next_rows = t > 0;
    switch (rows) {
      case 5:
        TileBf16<5, NR>(a, m0, n0, n_step, next_rows);
        break;
      case 4:
        TileBf16<4, NR>(a, m0, n0, n_step, next_rows);
        break;
      case 3:
        TileBf16<3, NR>(a, m0, n0, n_step, next_rows);
        break;
      case 2:
        TileBf16<2, NR>(a, m0, n0, n_step, next_rows);
        break;
      default:
        TileBf16<1, NR>(a, m0, n0, n_step, next_rows);
        break;
    }
    m0 += rows;
  }
}

// All rows of columns n0 + j * n_step, j < NR (bf16: in row tiles of at most max_rows).
template <int NR, typename W>
HWY_INLINE void Columns(const MatmulArgs& a, int64_t n0, int64_t n_step, int64_t max_rows) {
  if constexpr (std::is_same_v<W, hwy::bfloat16_t>) {
    ColumnsBf16<NR>(a, n0, n_step, max_rows);
  } else {
    if (a.m == 1) return Tile<1, NR, W>(a, 0, n0, n_step, false);
    int64_t m = 0;
    for (; m + kTileRows <= a.m; m += kTileRows) {
      Tile<kTileRows, NR, W>(a, m, n0, n_step, m > 0);
    }
    const bool next_rows = m > 0;
    switch (a.m - m) {
      case 3:
        Tile<3, NR, W>(a, m, n0, n_step, next_rows);
        break;
      case 2:
        Tile<2, NR, W>(a, m, n0, n_step, next_rows);
        break;
      case 1:
        Tile<1, NR, W>(a, m, n0, n_step, next_rows);
        break;
      default:
        break;
    }
  }
}

// Splits [n_begin, n_end) into NR equal runs and walks them side by side, so the tile reads NR
// distant weight rows: NR sequential streams keep more DRAM requests in flight than one.
template <int NR, typename W>
void Walk(const MatmulArgs& a, int64_t n_begin, int64_t n_end, int64_t max_rows = 0) {
  const int64_t run = (n_end - n_begin) / NR;
  for (int64_t i = 0; i < run; ++i) Columns<NR, W>(a, n_begin + i, run, max_rows);
  for (int64_t n = n_begin + NR * run; n < n_end; ++n) Columns<1, W>(a, n, 0, max_rows);
}

// The bf16 tile shape for M rows: register tiles of up to R rows x NR columns keep R * NR
// accumulators, NR weight vectors and one x vector in registers. With 16 registers: 1-2 rows x 4
// columns, else up to 4 x 3 (M = 5 as two tiles of 2 and 3 rows; one 5 x 2 tile, even with x kept
// in registers, was no faster on Zen 3 with hot weights and 2-21% slower from DRAM:
// bench/results/cpu_small-m-tiles-tried_2026-11-28.txt); each accumulator takes two dependent
// multiply-adds per chunk.
void RunBf16(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
#if HWY_TARGET <= HWY_AVX3
  Walk<4, hwy::bfloat16_t>(a, n_begin, n_end, 5);  // 32 registers: up to 5 x 4 accumulators
#else
  if (a.m <= 2) {
    Walk<4, hwy::bfloat16_t>(a, n_begin, n_end, 2);
  } else {
    Walk<3, hwy::bfloat16_t>(a, n_begin, n_end, 4);
  }
#endif
}

template <typename W>
void Run(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  if (a.m == 1) {
    Walk<kDecodeCols, W>(a, n_begin, n_end);
  } else {
    Walk<kTileCols, W>(a, n_begin, n_end);
  }
}

void MatmulSmall(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  switch (a.w_dtype) {
    case DType::kF32:
      return Run<float>(a, n_begin, n_end);
    case DType::kF16:
      return Run<hwy::float16_t>(a, n_begin, n_end);
    case DType::kBF16:
      return RunBf16(a, n_begin, n_end);
    default:
      break;
  }
}

// out[m][c * 2L + l] = x[m][c * 2L + 2l] and out[m][c * 2L + L + l] = x[m][c * 2L + 2l + 1], for
// whole chunks of 2L elements (L = f32 lanes), then the tail in place: the layout TileBf16 reads.
// `round_bf16`: each value rounded to the nearest bf16 (ties to even).
void SplitX(const MatmulArgs& a, bool round_bf16, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t k_vec = a.k - a.k % (2 * lanes);
  auto value = [round_bf16](float v) { return round_bf16 ? round_to_bf16(v) : v; };
  for (int64_t m = 0; m < a.m; ++m) {
    const float* x = a.x + m * a.x_stride;
    float* o = out + m * split_x_stride(a.k);
    for (int64_t c = 0; c < k_vec; c += 2 * lanes) {
      for (int64_t l = 0; l < lanes; ++l) {
        o[c + l] = value(x[c + 2 * l]);
        o[c + lanes + l] = value(x[c + 2 * l + 1]);
      }
    }
    for (int64_t k = k_vec; k < a.k; ++k) o[k] = value(x[k]);
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(MatmulSmall);
HWY_EXPORT(SplitX);
HWY_EXPORT(TargetName);

void matmul_small(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(MatmulSmall)(args, n_begin, n_end);
}

void split_x(const MatmulArgs& args, bool round_bf16, float* out) {
  HWY_DYNAMIC_DISPATCH(SplitX)(args, round_bf16, out);
}

const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace specd::cpu
#endif  // HWY_ONCE
