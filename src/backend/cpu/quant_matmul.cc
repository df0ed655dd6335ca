// Batch-invariant small-M matmul on block-quantised weights (GGUF's q8_0, q4_0, q4_1, q5_0,
// q5_1, q4_k, q5_k, q6_k, and specd's load-time int8 and int4): one format-specialised pass
// over each weight row for a group of rows of x.
//
// Every format is a sequence of 32-element groups of small integers q with w = d_g * q + m_g
// (q6_k's 16-element groups fold their int8 scales into q). x is rounded once per call to int16
// codes per 32-element group, x ~= s_g * c (quantize_x; relative error at most 2^-16 of the group's
// largest |x|), so that
//   x · w = sum_g d_g * s_g * (sum_{i in g} q_i c_i) + sum_g m_g * (sum_{i in g} x_i),
// where the inner sums are exact integer pairwise multiply-adds (int16 x int16 -> int32) and the
// group sums of x are exact f32 sums. A weight block is decoded to int16 codes with u16 vectors
// (q8_0 and int8 are widened in place). The symmetric formats (q8_0, q4_0, q5_0, q6_k, int8)
// fold their centre into q and have no m_g term.
//
// Every (row m, column n) result is computed by the same operations whatever M, the row group
// or the thread's column range: per group, the integer sum converted to f32, times s_g, FMA'd
// with d_g into the row's vector accumulator; then the fixed SumOfLanes reduction, + the m_g
// terms (an FMA chain in group order, one vector lane per row: all rows of a pass in one FMA
// per group), + bias, then y + result. x is stored group-major, so the rows a pass takes
// together are side by side and one pointer walks them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/quant_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/highway.h"
//
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/kernels.h"
#include "backend/quant_ref.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Software prefetch distance in the weight bytes.
constexpr size_t kPrefetchBytes = 1024;
// Rows of x per pass over a weight row: an accumulator and a group sum each, in registers.
constexpr int kRowsPerPass = 5;
// Columns side by side when x has one row: independent FMA chains and weight streams (q8_0 and
// q4_0 on Zen 3, weights in L2: 1.1x the elements per ns).
constexpr int kDecodeStreams = 2;
// Elements per m_g group (every format with offsets has 32-element groups).
constexpr int64_t kOffsetGroup = 32;
// Floats after x's group sums that a vector of rows (DR below) may read past the last row.
constexpr int64_t kRowPad = 16;

// x's int16 codes (at most 16 lanes, so that a vector never crosses q6_k's 16-element scale
// groups), the int32 lanes of their pairwise products, and f32 vectors of as many lanes.
using DI16 = hn::CappedTag<int16_t, 16>;
using DI32 = hn::Repartition<int32_t, DI16>;
using DF = hn::Rebind<float, DI32>;
// Weight codes are decoded as u16 lanes from bytes half as wide.
using DU16 = hn::Rebind<uint16_t, DI16>;
using DU8 = hn::Rebind<uint8_t, DI16>;
// A vector of rows of x (the m_g terms): at most 8, one vector for a pass on AVX2 and AVX-512.
using DR = hn::CappedTag<float, 8>;
constexpr int kRowLanes = static_cast<int>(hn::MaxLanes(DR()));
static_assert(kRowLanes <= kRowPad);

// f16 at p (unaligned) -> f32, with the target's conversion instruction where it has one.
HWY_INLINE float Half(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

// A decoded block: q (int16 codes, element order; q8_0 and int8 point q8 at the weight bytes
// instead) and per group the scale d and offset m.
template <int kElems, int kGroupElems>
struct Decoded {
  static constexpr int kGroup = kGroupElems;
  static constexpr int kGroups = kElems / kGroupElems;
  HWY_ALIGN int16_t q[kElems];
  const int8_t* q8 = nullptr;
  float d[kGroups];
  float m[kGroups];
  const uint8_t* d16 = nullptr;  // the f16 scale of a one-group block (Column reads it, not d)
};

// The f16 at p (unaligned) in every f32 lane: the same value as Half(p), converted as a vector.
HWY_INLINE hn::Vec<DF> HalfLanes(const uint8_t* p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<hwy::float16_t, DF> dh;
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return hn::PromoteTo(DF(), hn::BitCast(dh, hn::Set(du16, bits)));
}

// Stores code - centre of every u16 lane to u (int16).
HWY_INLINE void StoreCodes(hn::Vec<DU16> v, uint16_t centre, int16_t* HWY_RESTRICT u) {
  const DI16 d16;
  hn::Store(hn::BitCast(d16, hn::Sub(v, hn::Set(DU16(), centre))), d16, u);
}

// Stores (code - 32) * scale of every u16 lane to u (int16).
HWY_INLINE void StoreScaledCodes(hn::Vec<DU16> v, int8_t scale, int16_t* HWY_RESTRICT u) {
  const DI16 d16;
  const auto centred = hn::BitCast(d16, hn::Sub(v, hn::Set(DU16(), 32)));
  hn::Store(hn::Mul(centred, hn::Set(d16, static_cast<int16_t>(scale))), d16, u);
}

// The u16 lanes of 16 (or, on narrower targets, fewer) bytes at p.
HWY_INLINE hn::Vec<DU16> Bytes(const uint8_t* HWY_RESTRICT p) {
  return hn::PromoteTo(DU16(), hn::LoadU(DU8(), p));
}

// 16 where bit `bit` of lane h is set, else 0.
HWY_INLINE hn::Vec<DU16> Sixteen(hn::Vec<DU16> h, hn::Vec<DU16> bit) {
  return hn::IfThenElseZero(hn::TestBit(h, bit), hn::Set(DU16(), 16));
}

// The 32 elements of a nibble block from its 16 bytes b: element e is the low nibble of byte e
// for e < 16 and the high nibble of byte e - 16 otherwise, plus 16 where bit e of the
// little-endian 32-bit word at qh is set (kFive: the fifth bit of q5_0 / q5_1), minus c.
template <bool kFive>
HWY_INLINE void Nibbles(const uint8_t* HWY_RESTRICT b, const uint8_t* HWY_RESTRICT qh, uint16_t c,
                        int16_t* HWY_RESTRICT u) {
  const DU16 du;
  HWY_ALIGN static constexpr uint16_t kBit[16] = {1,   2,   4,    8,    16,   32,   64,    128,
                                                  256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
  [[maybe_unused]] uint32_t word = 0;
  if constexpr (kFive) std::memcpy(&word, qh, 4);
  for (size_t e = 0; e < 16; e += hn::Lanes(du)) {
    auto lo = hn::And(Bytes(b + e), hn::Set(du, 0x0F));
    auto hi = hn::ShiftRight<4>(Bytes(b + e));
    if constexpr (kFive) {
      const auto bit = hn::Load(du, kBit + e);
      lo = hn::Or(lo, Sixteen(hn::Set(du, static_cast<uint16_t>(word)), bit));
      hi = hn::Or(hi, Sixteen(hn::Set(du, static_cast<uint16_t>(word >> 16)), bit));
    }
    StoreCodes(lo, c, u + e);
    StoreCodes(hi, c, u + 16 + e);
  }
}

// One struct per format: kBlockElems, kBlockBytes, kOffsets, kInt8Codes (the block holds its
// codes as int8 bytes, read in place) and Decode(block, out).
struct Format {
  static constexpr bool kInt8Codes = false;
};

struct Q8_0 : Format {
  static constexpr bool kInt8Codes = true;
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  static constexpr bool kOffsets = false;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d16 = b;
    o.q8 = reinterpret_cast<const int8_t*>(b + 2);
  }
};

struct Q4_0 : Format {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  static constexpr bool kOffsets = false;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d16 = b;
    Nibbles<false>(b + 2, nullptr, 8, o.q);
  }
};

struct Q4_1 : Format {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  static constexpr bool kOffsets = true;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d16 = b;
    o.m[0] = Half(b + 2);
    Nibbles<false>(b + 4, nullptr, 0, o.q);
  }
};

struct Q5_0 : Format {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  static constexpr bool kOffsets = false;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d16 = b;
    Nibbles<true>(b + 6, b + 2, 16, o.q);
  }
};

struct Q5_1 : Format {
  static constexpr int kBlockElems = 32, kBlockBytes = 24;
  static constexpr bool kOffsets = true;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d16 = b;
    o.m[0] = Half(b + 2);
    Nibbles<true>(b + 8, b + 4, 0, o.q);
  }
};

// q4_k (kFive = false) and q5_k: eight 32-element groups with 6-bit scales and mins.
template <bool kFive>
struct QK45 : Format {
  static constexpr int kBlockElems = 256, kBlockBytes = kFive ? 176 : 144;
  static constexpr bool kOffsets = true;
  using Block = Decoded<256, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    const DU16 du;
    const float d = Half(b), dmin = Half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + (kFive ? 48 : 16);
    HWY_ALIGN uint8_t sm[16];  // the 6-bit scales, then the mins
    k_quant_scales_mins(scales, sm);
    const hn::CappedTag<float, 8> df;
    const hn::Rebind<int32_t, decltype(df)> di;
    const hn::Rebind<uint8_t, decltype(df)> d8;
    for (size_t j = 0; j < 8; j += hn::Lanes(df)) {
      const auto sc = hn::ConvertTo(df, hn::PromoteTo(di, hn::Load(d8, sm + j)));
      const auto mn = hn::ConvertTo(df, hn::PromoteTo(di, hn::Load(d8, sm + 8 + j)));
      hn::StoreU(hn::Mul(hn::Set(df, d), sc), df, o.d + j);
      hn::StoreU(hn::Neg(hn::Mul(hn::Set(df, dmin), mn)), df, o.m + j);
    }
    for (int j = 0; j < 8; j += 2, q += 32) {
      for (size_t l = 0; l < 32; l += hn::Lanes(du)) {
        const auto v = Bytes(q + l);
        auto lo = hn::And(v, hn::Set(du, 0x0F)), hi = hn::ShiftRight<4>(v);
        if constexpr (kFive) {
          const auto h = Bytes(qh + l);
          lo = hn::Or(lo, Sixteen(h, hn::Set(du, static_cast<uint16_t>(1u << j))));
          hi = hn::Or(hi, Sixteen(h, hn::Set(du, static_cast<uint16_t>(2u << j))));
        }
        StoreCodes(lo, 0, o.q + 32 * j + l);
        StoreCodes(hi, 0, o.q + 32 * j + 32 + l);
      }
    }
  }
};

// specd's load-time formats (backend/quant_ref.h): 128-element blocks, one scale (int4: and
// min) per block, here repeated over four 32-element groups.
struct Int8 : Format {
  static constexpr bool kInt8Codes = true;
  static constexpr int kBlockElems = 128, kBlockBytes = 132;
  static constexpr bool kOffsets = false;
  using Block = Decoded<128, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    float d;
    std::memcpy(&d, b, 4);
    for (float& g : o.d) g = d;
    o.q8 = reinterpret_cast<const int8_t*>(b + 4);
  }
};

// int4: byte j holds element j (low nibble) and element j + 64 (high nibble).
struct Int4 : Format {
  static constexpr int kBlockElems = 128, kBlockBytes = 68;
  static constexpr bool kOffsets = true;
  using Block = Decoded<128, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    const DU16 du;
    const float d = Half(b), m = Half(b + 2);
    for (int g = 0; g < 4; ++g) {
      o.d[g] = d;
      o.m[g] = m;
    }
    for (size_t l = 0; l < 64; l += hn::Lanes(du)) {
      const auto v = Bytes(b + 4 + l);
      StoreCodes(hn::And(v, hn::Set(du, 0x0F)), 0, o.q + l);
      StoreCodes(hn::ShiftRight<4>(v), 0, o.q + 64 + l);
    }
  }
};

// q6_k: sixteen 16-element groups with int8 scales, values 0..63 centred on 32. Each code is
// multiplied by its group's int8 scale as it is decoded (|product| <= 4096, so int16 holds it and
// the int32 dot products cannot overflow), which leaves eight 32-element groups that share d.
struct Q6_K : Format {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  static constexpr bool kOffsets = false;
  using Block = Decoded<256, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    const DU16 du;
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = Half(b + 208);
    for (float& g : o.d) g = d;
    const auto low4 = hn::Set(du, 0x0F), three = hn::Set(du, 3);
    int16_t* u = o.q;
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
      for (size_t l = 0; l < 32; l += hn::Lanes(du)) {
        const auto a = Bytes(ql + l), c = Bytes(ql + l + 32);
        const auto h = Bytes(qh + l);
        const auto h0 = hn::ShiftLeft<4>(hn::And(h, three));
        const auto h2 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), three));
        const auto h4 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), three));
        const auto h6 = hn::ShiftLeft<4>(hn::ShiftRight<6>(h));
        const size_t g = l / 16;  // a vector never crosses a 16-element group
        StoreScaledCodes(hn::Or(hn::And(a, low4), h0), sc[g], u + n + l);
        StoreScaledCodes(hn::Or(hn::And(c, low4), h2), sc[g + 2], u + n + l + 32);
        StoreScaledCodes(hn::Or(hn::ShiftRight<4>(a), h4), sc[g + 4], u + n + l + 64);
        StoreScaledCodes(hn::Or(hn::ShiftRight<4>(c), h6), sc[g + 6], u + n + l + 96);
      }
    }
  }
};

QuantizedX QuantizeX(const MatmulArgs& a, float* scratch) {
  const DF d;
  const hn::Rebind<int16_t, DF> d16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t groups = a.k / kOffsetGroup;
  float* scale = scratch;
  float* sum = scratch + a.m * groups;
  int16_t* q = reinterpret_cast<int16_t*>(sum + a.m * groups + kRowPad);
  std::fill(sum + a.m * groups, sum + a.m * groups + kRowPad, 0.0f);
  for (int64_t i = 0; i < a.m; ++i) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = a.x + i * a.x_stride + g * kOffsetGroup;
      auto s = hn::Zero(d), top = hn::Zero(d);
      for (int64_t j = 0; j < kOffsetGroup; j += lanes) {
        const auto v = hn::LoadU(d, x + j);
        s = hn::Add(s, v);
        top = hn::Max(top, hn::Abs(v));
      }
      const int64_t ig = g * a.m + i;
      sum[ig] = hn::GetLane(hn::SumOfLanes(d, s));
      const float amax = hn::GetLane(hn::MaxOfLanes(d, top));
      float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
      scale[ig] = amax / 32767.0f;
      if (!std::isfinite(sum[ig]) || !std::isfinite(amax)) {
        scale[ig] = std::numeric_limits<float>::quiet_NaN();
        inv = 0.0f;
      }
      const auto vinv = hn::Set(d, inv);
      for (int64_t j = 0; j < kOffsetGroup; j += lanes) {
        const auto r = hn::NearestInt(hn::Mul(hn::LoadU(d, x + j), vinv));
        hn::StoreU(hn::DemoteTo(d16, r), d16, q + ig * kOffsetGroup + j);
      }
    }
  }
  return {sum, scale, q, groups, a.m};
}

// Per group: q (int8 -> int16) times x's int16 codes, summed exactly in int32 lanes by
// pairwise multiply-adds; converted to f32, times x's group scale, FMA'd with d_g into the row's
// vector accumulator. NC columns n0 + c * n_step go side by side (independent accumulator chains
// and weight streams; each column's arithmetic is the same whatever NC).
template <class F, int MR, int NC>
HWY_INLINE void Column(const MatmulArgs& a, int64_t m0, int64_t n0, int64_t n_step,
                       size_t row_bytes, const QuantizedX& xq) {
  const DF d;
  const DI16 d16;
  const DI32 d32;
  const hn::Rebind<int8_t, DI16> d8;
  using V = hn::Vec<DF>;
  using VI = hn::Vec<DI32>;
  using Block = typename F::Block;
  constexpr int kGroup = Block::kGroup;
  static_assert(kGroup == kOffsetGroup, "x and the weights share 32-element groups");
  const int64_t lanes16 = static_cast<int64_t>(hn::Lanes(d16));
  const uint8_t* w[NC];
  for (int c = 0; c < NC; ++c) {
    w[c] = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(n0 + c * n_step) * row_bytes;
  }
  // Rows as lanes: the m_g terms of all MR rows of a column take one FMA per group.
  const DR dr;
  constexpr int kRowVecs = (MR + kRowLanes - 1) / kRowLanes;
  V acc[MR][NC];
  hn::Vec<DR> off[NC][kRowVecs];
  for (int c = 0; c < NC; ++c) {
    for (int i = 0; i < MR; ++i) acc[i][c] = hn::Zero(d);
    for (int r = 0; r < kRowVecs; ++r) off[c][r] = hn::Zero(dr);
  }
  Block blk[NC];
  // x's codes, scales and sums of rows m0... in the current 32-element group (group-major: one
  // group's rows are kOffsetGroup codes apart, the next group's rows * kOffsetGroup on).
  const int64_t rows = xq.rows;
  const int16_t* xg = xq.q + m0 * kOffsetGroup;
  const float* scale = xq.scale + m0;
  const float* sum = xq.sum + m0;
  for (int64_t k0 = 0; k0 < a.k; k0 += F::kBlockElems) {
    for (int c = 0; c < NC; ++c) {
      for (int off_bytes = 0; off_bytes < F::kBlockBytes; off_bytes += 64) {
        hwy::Prefetch(w[c] + kPrefetchBytes + off_bytes);
      }
      F::Decode(w[c], blk[c]);
      w[c] += F::kBlockBytes;
    }
    for (int g = 0; g < Block::kGroups; ++g) {
      const int16_t* x = xg;  // row i's codes at i * kOffsetGroup
      for (int c = 0; c < NC; ++c) {
        VI dot[MR], odd[MR];
        for (int i = 0; i < MR; ++i) dot[i] = odd[i] = hn::Zero(d32);
        for (int64_t j = 0; j < kGroup; j += lanes16) {
          hn::Vec<DI16> wj;
          if constexpr (F::kInt8Codes) {
            wj = hn::PromoteTo(d16, hn::LoadU(d8, blk[c].q8 + g * kGroup + j));
          } else {
            wj = hn::Load(d16, blk[c].q + g * kGroup + j);
          }
          for (int i = 0; i < MR; ++i) {
            dot[i] = hn::ReorderWidenMulAccumulate(
                d32, wj, hn::LoadU(d16, x + i * kOffsetGroup + j), dot[i], odd[i]);
          }
        }
        const V wscale = Block::kGroups == 1 ? HalfLanes(blk[c].d16) : hn::Set(d, blk[c].d[g]);
        for (int i = 0; i < MR; ++i) {
          const V xdot = hn::ConvertTo(d, hn::RearrangeToOddPlusEven(dot[i], odd[i]));
          acc[i][c] = hn::MulAdd(hn::Mul(xdot, hn::Set(d, scale[i])), wscale, acc[i][c]);
        }
        if constexpr (F::kOffsets) {
          const auto m = hn::Set(dr, blk[c].m[g]);
          for (int r = 0; r < kRowVecs; ++r) {
            off[c][r] = hn::MulAdd(m, hn::LoadU(dr, sum + r * kRowLanes), off[c][r]);
          }
        }
      }
      xg += rows * kOffsetGroup;
      scale += rows;
      sum += rows;
    }
  }
  for (int c = 0; c < NC; ++c) {
    const int64_t n = n0 + c * n_step;
    const float bias = a.bias != nullptr ? load_as_f32(a.bias, a.bias_dtype, n) : 0.0f;
    HWY_ALIGN float offs[kRowVecs * kRowLanes];
    for (int r = 0; r < kRowVecs; ++r) hn::Store(off[c][r], dr, offs + r * kRowLanes);
    for (int i = 0; i < MR; ++i) {
      float r = hn::GetLane(hn::SumOfLanes(d, acc[i][c]));
      if constexpr (F::kOffsets) r = r + offs[i];
      if (a.bias != nullptr) r = r + bias;
      float& out = a.y[(m0 + i) * a.y_stride + n];
      out = a.accumulate ? out + r : r;
    }
  }
}

// All rows of column n: passes of kRowsPerPass rows, then the rest.
template <class F>
void ColumnRows(const MatmulArgs& a, int64_t n, size_t row_bytes, const QuantizedX& xq) {
  int64_t m = 0;
  for (; m + kRowsPerPass <= a.m; m += kRowsPerPass) {
    Column<F, kRowsPerPass, 1>(a, m, n, 0, row_bytes, xq);
  }
  switch (a.m - m) {
    case 4:
      return Column<F, 4, 1>(a, m, n, 0, row_bytes, xq);
    case 3:
      return Column<F, 3, 1>(a, m, n, 0, row_bytes, xq);
    case 2:
      return Column<F, 2, 1>(a, m, n, 0, row_bytes, xq);
    case 1:
      return Column<F, 1, 1>(a, m, n, 0, row_bytes, xq);
    default:
      return;
  }
}

// A single row of x (decode) on 32-element blocks walks kDecodeStreams equal runs of columns side
// by side; more rows, and the 256-element k-quant blocks (whose decoded codes do not all fit in
// registers), take one column at a time.
template <class F>
void Columns(const MatmulArgs& a, int64_t n_begin, int64_t n_end, const QuantizedX& xq) {
  const size_t row_bytes = dtype_row_bytes(a.w_dtype, a.w_stride);
  int64_t n = n_begin;
  if (a.m == 1 && F::kBlockElems == 32) {
    const int64_t run = (n_end - n_begin) / kDecodeStreams;
    for (int64_t i = 0; i < run; ++i) {
      Column<F, 1, kDecodeStreams>(a, 0, n_begin + i, run, row_bytes, xq);
    }
    n = n_begin + kDecodeStreams * run;
  }
  for (; n < n_end; ++n) ColumnRows<F>(a, n, row_bytes, xq);
}

void MatmulQuant(const MatmulArgs& a, const QuantizedX& xq, int64_t n_begin, int64_t n_end) {
  switch (a.w_dtype) {
    case DType::kQ8_0:
      return Columns<Q8_0>(a, n_begin, n_end, xq);
    case DType::kQ4_0:
      return Columns<Q4_0>(a, n_begin, n_end, xq);
    case DType::kQ4_1:
      return Columns<Q4_1>(a, n_begin, n_end, xq);
    case DType::kQ5_0:
      return Columns<Q5_0>(a, n_begin, n_end, xq);
    case DType::kQ5_1:
      return Columns<Q5_1>(a, n_begin, n_end, xq);
    case DType::kQ4_K:
      return Columns<QK45<false>>(a, n_begin, n_end, xq);
    case DType::kQ5_K:
      return Columns<QK45<true>>(a, n_begin, n_end, xq);
    case DType::kQ6_K:
      return Columns<Q6_K>(a, n_begin, n_end, xq);
    case DType::kInt8:
      return Columns<Int8>(a, n_begin, n_end, xq);
    case DType::kInt4:
      return Columns<Int4>(a, n_begin, n_end, xq);
    default:
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(QuantizeX);
HWY_EXPORT(MatmulQuant);

QuantizedX quantize_x(const MatmulArgs& args, float* scratch) {
  return HWY_DYNAMIC_DISPATCH(QuantizeX)(args, scratch);
}

void matmul_quant(const MatmulArgs& args, const QuantizedX& x, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQuant)(args, x, n_begin, n_end);
}

// QuantizeX's scales, sums (f32, then kRowPad = 16 floats) and int16 codes.
int64_t matmul_quant_scratch(const MatmulArgs& args) {
  return 2 * args.m * (args.k / 32) + 16 + (args.m * args.k + 1) / 2;
}

}  // namespace specd::cpu
#endif  // HWY_ONCE
