// Batch-invariant small-M matmul on specd's load-time formats (int8 per output channel, int4
// group 128): each weight vector is dequantised once in registers (y = d * q, or d * q + m as
// two roundings, exactly as backend/quant_ref.cc) and multiplied into the rows of x.
//
// Every (row m, column n) result is computed by the same operations whatever M, the row group
// or the thread's column range: two vector accumulators of f32 lanes, alternating over
// k = 0, L, 2L, ... (L = lanes of the target; blocks are 128 elements, a multiple of 2L), then
// their sum, the fixed SumOfLanes reduction, + bias, then y + result.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/int_quant_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/highway.h"
//
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int64_t kBlock = 128;
// Rows of x per pass over a weight row (2 accumulators each stay in registers).
constexpr int kRowsPerPass = 4;
// Software prefetch distance in the weight bytes.
constexpr size_t kPrefetchBytes = 1024;

// Dequantised weights of one block at element k (lanes of d): int8 and int4 layouts.
struct Int8Block {
  const int8_t* q;
  float scale;
};
struct Int4Block {
  const uint8_t* q;
  float scale, min;
};

template <class D>
HWY_INLINE hn::Vec<D> Dequant(D d, const Int8Block& b, int64_t k) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<int8_t, D> d8;
  const auto q = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, b.q + k)));
  return hn::Mul(hn::Set(d, b.scale), q);
}

template <class D>
HWY_INLINE hn::Vec<D> Dequant(D d, const Int4Block& b, int64_t k) {
  const hn::Rebind<int32_t, D> di;
  const hn::Rebind<uint8_t, D> d8;
  constexpr int64_t kHalf = kBlock / 2;
  const auto bytes = hn::PromoteTo(di, hn::LoadU(d8, b.q + (k < kHalf ? k : k - kHalf)));
  const auto codes = k < kHalf ? hn::And(bytes, hn::Set(di, 0x0F)) : hn::ShiftRight<4>(bytes);
  return hn::Add(hn::Mul(hn::Set(d, b.scale), hn::ConvertTo(d, codes)), hn::Set(d, b.min));
}

HWY_INLINE Int8Block BlockAt(const uint8_t* p, Int8Block*) {
  Int8Block b;
  std::memcpy(&b.scale, p, 4);
  b.q = reinterpret_cast<const int8_t*>(p + 4);
  return b;
}

HWY_INLINE float Half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

HWY_INLINE Int4Block BlockAt(const uint8_t* p, Int4Block*) {
  return Int4Block{p + 4, Half(p), Half(p + 2)};
}

template <class Block, int MR>
HWY_INLINE void Column(const MatmulArgs& a, int64_t m0, int64_t n, size_t row_bytes,
                       size_t block_bytes) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const uint8_t* w = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(n) * row_bytes;
  V acc0[MR], acc1[MR];
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = hn::Zero(d);
  for (int64_t k0 = 0; k0 < a.k; k0 += kBlock) {
    const uint8_t* p = w + static_cast<size_t>(k0 / kBlock) * block_bytes;
    // Prefetches (into the next rows at the end of this one) do not change the arithmetic.
    for (size_t off = 0; off < block_bytes; off += 64) hwy::Prefetch(p + kPrefetchBytes + off);
    const Block b = BlockAt(p, static_cast<Block*>(nullptr));
    const float* x[MR];
    for (int i = 0; i < MR; ++i) x[i] = a.x + (m0 + i) * a.x_stride + k0;
    for (int64_t k = 0; k < kBlock; k += 2 * lanes) {
      const V w0 = Dequant(d, b, k), w1 = Dequant(d, b, k + lanes);
      for (int i = 0; i < MR; ++i) {
        acc0[i] = hn::MulAdd(w0, hn::LoadU(d, x[i] + k), acc0[i]);
        acc1[i] = hn::MulAdd(w1, hn::LoadU(d, x[i] + k + lanes), acc1[i]);
      }
    }
  }
  const float bias = a.bias != nullptr ? load_as_f32(a.bias, a.bias_dtype, n) : 0.0f;
  for (int i = 0; i < MR; ++i) {
    float r = hn::GetLane(hn::SumOfLanes(d, hn::Add(acc0[i], acc1[i])));
    if (a.bias != nullptr) r = r + bias;
    float& out = a.y[(m0 + i) * a.y_stride + n];
    out = a.accumulate ? out + r : r;
  }
}

template <class Block>
void Columns(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const size_t row_bytes = dtype_row_bytes(a.w_dtype, a.w_stride);
  const size_t block_bytes = dtype_block_bytes(a.w_dtype);
  for (int64_t n = n_begin; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + kRowsPerPass <= a.m; m += kRowsPerPass) {
      Column<Block, kRowsPerPass>(a, m, n, row_bytes, block_bytes);
    }
    switch (a.m - m) {
      case 3:
        Column<Block, 3>(a, m, n, row_bytes, block_bytes);
        break;
      case 2:
        Column<Block, 2>(a, m, n, row_bytes, block_bytes);
        break;
      case 1:
        Column<Block, 1>(a, m, n, row_bytes, block_bytes);
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
