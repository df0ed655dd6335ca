// Batch-invariant small-M matmul on specd's load-time formats (int8 per output channel, int4
// group 128). Per 128-element block the codes q are widened to f32 once for all rows of x and
// multiplied into per-block vector sums of q * x; the block's scale is applied to those sums
// (d * sum(q x), and for int4 + m * sum(x), with sum(x) per row and block computed once per call).
//
// Every (row m, column n) result is computed by the same operations whatever M, the row group
// or the thread's column range: per block, two vector sums alternating over k = 0, L, 2L, ...
// (L = lanes of the target; 128 is a multiple of 2L), folded into two vector accumulators with
// one multiply-add by d each; the int4 offsets m * sum(x) added in block order into a scalar;
// then the accumulators' sum, the fixed SumOfLanes reduction, + the offsets, + bias, then
// y + result.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/int_quant_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/highway.h"
//
#include <cstring>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kBlock = 128;
// Rows of x per pass over a weight row (4 vectors each stay in registers).
constexpr int kRowsPerPass = 4;
// Software prefetch distance in the weight bytes.
constexpr size_t kPrefetchBytes = 1024;

// One block's codes and scale (int4: and min).
struct Int8Block {
  const int8_t* q;
  float scale;
  static constexpr bool kHasMin = false;
  float min = 0.0f;
};
struct Int4Block {
  const uint8_t* q;
  float scale, min;
  static constexpr bool kHasMin = true;
};

// Codes of elements [k, k + lanes) of the block as f32 (exact small integers).
template <class D>
HWY_INLINE hn::Vec<D> Codes(D d, const Int8Block& b, int64_t k) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<int8_t, D> d8;
  return hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, b.q + k)));
}

template <class D>
HWY_INLINE hn::Vec<D> Codes(D d, const Int4Block& b, int64_t k) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<uint8_t, D> d8;
  constexpr int64_t kHalf = kBlock / 2;
  const auto bytes = hn::PromoteTo(di, hn::LoadU(d8, b.q + (k < kHalf ? k : k - kHalf)));
  return hn::ConvertTo(d, k < kHalf ? hn::And(bytes, hn::Set(di, 0x0F)) : hn::ShiftRight<4>(bytes));
}

// f16 at p (unaligned) -> f32, with the target's conversion instruction where it has one.
HWY_INLINE float Half(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

HWY_INLINE Int8Block BlockAt(const uint8_t* p, Int8Block*) {
  Int8Block b;
  std::memcpy(&b.scale, p, 4);
  b.q = reinterpret_cast<const int8_t*>(p + 4);
  return b;
}

HWY_INLINE Int4Block BlockAt(const uint8_t* p, Int4Block*) {
  return Int4Block{p + 4, Half(p), Half(p + 2)};
}

// sums[r * blocks + j] = sum of x[r][128 j .. 128 j + 128) in a fixed order, for rows [0, m).
void BlockSums(const MatmulArgs& a, float* sums) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t blocks = a.k / kBlock;
  for (int64_t r = 0; r < a.m; ++r) {
    const float* x = a.x + r * a.x_stride;
    for (int64_t j = 0; j < blocks; ++j) {
      auto s0 = hn::Zero(d), s1 = hn::Zero(d);
      for (int64_t k = j * kBlock; k < (j + 1) * kBlock; k += 2 * lanes) {
        s0 = hn::Add(s0, hn::LoadU(d, x + k));
        s1 = hn::Add(s1, hn::LoadU(d, x + k + lanes));
      }
      sums[r * blocks + j] = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
    }
  }
}

template <class Block, int MR>
HWY_INLINE void Column(const MatmulArgs& a, int64_t m0, int64_t n, size_t row_bytes,
                       size_t block_bytes, const float* sums) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t blocks = a.k / kBlock;
  const uint8_t* w = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(n) * row_bytes;
  V acc0[MR], acc1[MR];
  float offset[MR];
  for (int i = 0; i < MR; ++i) {
    acc0[i] = acc1[i] = hn::Zero(d);
    offset[i] = 0.0f;
  }
  for (int64_t j = 0; j < blocks; ++j) {
    const uint8_t* p = w + static_cast<size_t>(j) * block_bytes;
    // Prefetches (into the next rows at the end of this one) do not change the arithmetic.
    for (size_t off = 0; off < block_bytes; off += 64) hwy::Prefetch(p + kPrefetchBytes + off);
    const Block b = BlockAt(p, static_cast<Block*>(nullptr));
    const float* x[MR];
    V sum0[MR], sum1[MR];
    for (int i = 0; i < MR; ++i) {
      x[i] = a.x + (m0 + i) * a.x_stride + j * kBlock;
      sum0[i] = sum1[i] = hn::Zero(d);
    }
    for (int64_t k = 0; k < kBlock; k += 2 * lanes) {
      const V q0 = Codes(d, b, k), q1 = Codes(d, b, k + lanes);
      for (int i = 0; i < MR; ++i) {
        sum0[i] = hn::MulAdd(q0, hn::LoadU(d, x[i] + k), sum0[i]);
        sum1[i] = hn::MulAdd(q1, hn::LoadU(d, x[i] + k + lanes), sum1[i]);
      }
    }
    const V scale = hn::Set(d, b.scale);
    for (int i = 0; i < MR; ++i) {
      acc0[i] = hn::MulAdd(scale, sum0[i], acc0[i]);
      acc1[i] = hn::MulAdd(scale, sum1[i], acc1[i]);
      if constexpr (Block::kHasMin) offset[i] = offset[i] + b.min * sums[(m0 + i) * blocks + j];
    }
  }
  const float bias = a.bias != nullptr ? load_as_f32(a.bias, a.bias_dtype, n) : 0.0f;
  for (int i = 0; i < MR; ++i) {
    float r = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0[i], acc1[i])));
    if constexpr (Block::kHasMin) r = r + offset[i];
    if (a.bias != nullptr) r = r + bias;
    float& out = a.y[(m0 + i) * a.y_stride + n];
    out = a.accumulate ? out + r : r;
  }
}

template <class Block>
void Columns(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const size_t row_bytes = dtype_row_bytes(a.w_dtype, a.w_stride);
  const size_t block_bytes = dtype_block_bytes(a.w_dtype);
  // Per-thread scratch for the int4 sums of x: grows to the largest M x K / 128 seen, then is
  // reused (no allocation once warm).
  static thread_local std::vector<float> sums;
  if constexpr (Block::kHasMin) {
    const size_t need = static_cast<size_t>(a.m * (a.k / kBlock));
    if (sums.size() < need) sums.resize(need);
    BlockSums(a, sums.data());
  }
  for (int64_t n = n_begin; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + kRowsPerPass <= a.m; m += kRowsPerPass) {
      Column<Block, kRowsPerPass>(a, m, n, row_bytes, block_bytes, sums.data());
    }
    switch (a.m - m) {
      case 3:
        Column<Block, 3>(a, m, n, row_bytes, block_bytes, sums.data());
        break;
      case 2:
        Column<Block, 2>(a, m, n, row_bytes, block_bytes, sums.data());
        break;
      case 1:
        Column<Block, 1>(a, m, n, row_bytes, block_bytes, sums.data());
        break;
      default:
        break;
    }
  }
}

void MatmulIntQuant(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  if (a.w_dtype == DType::kInt8) {
    Columns<Int8Block>(a, n_begin, n_end);
  } else {
    Columns<Int4Block>(a, n_begin, n_end);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(MatmulIntQuant);

void matmul_int_quant(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(MatmulIntQuant)(args, n_begin, n_end);
}

}  // namespace specd::cpu
#endif  // HWY_ONCE
