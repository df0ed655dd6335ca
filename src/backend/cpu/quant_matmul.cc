// Batch-invariant small-M matmul on block-quantised weights (GGUF's q8_0, q4_0, q4_1, q5_0,
// q5_1, q4_k, q5_k, q6_k, and specd's load-time int8 and int4): one format-specialised pass
// over each weight row for a group of rows of x.
//
// Every format is a sequence of groups (16 or 32 elements) of small integers q with
// w = d_g * q + m_g. A block is decoded to int8 with byte vectors (q8_0 is read in place), and
//   x · w = sum_g d_g * (sum_{i in g} q_i x_i) + sum_g m_g * (sum_{i in g} x_i),
// with the group sums of x computed once per call. The symmetric formats (q8_0, q4_0, q5_0,
// q6_k) fold their centre into q and have no m_g term.
//
// Every (row m, column n) result is computed by the same operations whatever M, the row group
// or the thread's column range: per group, q widened to f32 and one FMA per vector of x in
// element order into a fresh vector, which is scaled by d_g into the row's vector accumulator;
// then the fixed SumOfLanes reduction, + the m_g terms (a scalar FMA chain in group order),
// + bias, then y + result.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/quant_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/highway.h"
//
#include <cmath>
#include <cstring>

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
// Elements per m_g group (every format with offsets has 32-element groups).
constexpr int64_t kOffsetGroup = 32;

// f32 vectors of at most 16 lanes (a 16-element group is at least one whole vector).
using DF = hn::CappedTag<float, 16>;
// Byte vectors of up to 32 lanes for the decoding (one 32-element block per 256-bit vector).
using D8 = hn::CappedTag<uint8_t, 32>;

// f16 at p (unaligned) -> f32, with the target's conversion instruction where it has one.
HWY_INLINE float Half(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

// A decoded block: q (int8, element order) and per group the scale d and offset m.
template <int kElems, int kGroupElems>
struct Decoded {
  static constexpr int kGroup = kGroupElems;
  static constexpr int kGroups = kElems / kGroupElems;
  HWY_ALIGN int8_t buf[kElems];
  const int8_t* q = buf;  // buf, or the weight bytes themselves (q8_0)
  float d[kGroups];
  float m[kGroups];
};

// The 32 elements of a nibble block from its 16 bytes b: element e is the low nibble of byte e
// for e < 16 and the high nibble of byte e - 16 otherwise, plus 16 where bit e of the
// little-endian 32-bit word at qh is set (kFive: the fifth bit of q5_0 / q5_1), minus c
// (wrapping bytes), stored to u[0..32).
template <bool kFive>
HWY_INLINE void Nibbles(const uint8_t* HWY_RESTRICT b, const uint8_t* HWY_RESTRICT qh, uint8_t c,
                        uint8_t* HWY_RESTRICT u) {
  const D8 d8;
  const hn::Repartition<uint32_t, D8> d32;
  // Lane e: whether it takes the high nibble; which qh byte and bit hold its fifth bit.
  HWY_ALIGN static constexpr uint8_t kHigh[32] = {0,    0,    0,    0,    0,    0,    0,    0,
                                                  0,    0,    0,    0,    0,    0,    0,    0,
                                                  0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                  0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  HWY_ALIGN static constexpr uint8_t kByte[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  HWY_ALIGN static constexpr uint8_t kBit[32] = {1,  2,   4,  8,  16,  32, 64, 128, 1,  2,  4,
                                                 8,  16,  32, 64, 128, 1,  2,  4,   8,  16, 32,
                                                 64, 128, 1,  2,  4,   8,  16, 32,  64, 128};
  // The 16 bytes in every 128-bit block (a 256-bit vector covers all 32 elements at once).
  const auto v = hn::LoadDup128(d8, b);
  const auto low = hn::And(v, hn::Set(d8, 0x0F)), high = hn::ShiftRight<4>(v);
  const auto centre = hn::Set(d8, c);
  [[maybe_unused]] hn::Vec<D8> bytes;
  if constexpr (kFive) {
    uint32_t word;
    std::memcpy(&word, qh, 4);
    bytes = hn::BitCast(d8, hn::Set(d32, word));
  }
  for (size_t e = 0; e < 32; e += hn::Lanes(d8)) {
    auto q = hn::IfThenElse(hn::MaskFromVec(hn::Load(d8, kHigh + e)), high, low);
    if constexpr (kFive) {
      const auto h = hn::TableLookupBytes(bytes, hn::Load(d8, kByte + e));
      q = hn::Or(q, hn::IfThenElseZero(hn::TestBit(h, hn::Load(d8, kBit + e)), hn::Set(d8, 16)));
    }
    hn::Store(hn::Sub(q, centre), d8, u + e);
  }
}

// One struct per format: kBlockElems, kBlockBytes, kOffsets and Decode(block, out).
struct Q8_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  static constexpr bool kOffsets = false;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d[0] = Half(b);
    o.q = reinterpret_cast<const int8_t*>(b + 2);
  }
};

struct Q4_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  static constexpr bool kOffsets = false;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d[0] = Half(b);
    Nibbles<false>(b + 2, nullptr, 8, reinterpret_cast<uint8_t*>(o.buf));
  }
};

struct Q4_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  static constexpr bool kOffsets = true;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d[0] = Half(b);
    o.m[0] = Half(b + 2);
    Nibbles<false>(b + 4, nullptr, 0, reinterpret_cast<uint8_t*>(o.buf));
  }
};

struct Q5_0 {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  static constexpr bool kOffsets = false;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d[0] = Half(b);
    Nibbles<true>(b + 6, b + 2, 16, reinterpret_cast<uint8_t*>(o.buf));
  }
};

struct Q5_1 {
  static constexpr int kBlockElems = 32, kBlockBytes = 24;
  static constexpr bool kOffsets = true;
  using Block = Decoded<32, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    o.d[0] = Half(b);
    o.m[0] = Half(b + 2);
    Nibbles<true>(b + 8, b + 4, 0, reinterpret_cast<uint8_t*>(o.buf));
  }
};

// q4_k (kFive = false) and q5_k: eight 32-element groups with 6-bit scales and mins.
template <bool kFive>
struct QK45 {
  static constexpr int kBlockElems = 256, kBlockBytes = kFive ? 176 : 144;
  static constexpr bool kOffsets = true;
  using Block = Decoded<256, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    const D8 d8;
    const float d = Half(b), dmin = Half(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + (kFive ? 48 : 16);
    uint8_t* u = reinterpret_cast<uint8_t*>(o.buf);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      k_quant_scale_min(j, scales, &sc, &mn);
      o.d[j] = d * sc;
      o.m[j] = -(dmin * mn);
    }
    for (int j = 0; j < 8; j += 2, q += 32) {
      for (size_t l = 0; l < 32; l += hn::Lanes(d8)) {
        const auto v = hn::LoadU(d8, q + l);
        auto lo = hn::And(v, hn::Set(d8, 0x0F)), hi = hn::ShiftRight<4>(v);
        if constexpr (kFive) {
          const auto h = hn::LoadU(d8, qh + l);
          const auto sixteen = hn::Set(d8, 16);
          lo = hn::Or(lo,
                      hn::IfThenElseZero(hn::TestBit(h, hn::Set(d8, uint8_t(1u << j))), sixteen));
          hi = hn::Or(hi,
                      hn::IfThenElseZero(hn::TestBit(h, hn::Set(d8, uint8_t(2u << j))), sixteen));
        }
        hn::Store(lo, d8, u + 32 * j + l);
        hn::Store(hi, d8, u + 32 * j + 32 + l);
      }
    }
  }
};

// specd's load-time formats (backend/quant_ref.h): 128-element blocks, one scale (int4: and
// min) per block, here repeated over four 32-element groups.
struct Int8 {
  static constexpr int kBlockElems = 128, kBlockBytes = 132;
  static constexpr bool kOffsets = false;
  using Block = Decoded<128, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    float d;
    std::memcpy(&d, b, 4);
    for (float& g : o.d) g = d;
    o.q = reinterpret_cast<const int8_t*>(b + 4);
  }
};

// int4: byte j holds element j (low nibble) and element j + 64 (high nibble).
struct Int4 {
  static constexpr int kBlockElems = 128, kBlockBytes = 68;
  static constexpr bool kOffsets = true;
  using Block = Decoded<128, 32>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    const D8 d8;
    const float d = Half(b), m = Half(b + 2);
    for (int g = 0; g < 4; ++g) {
      o.d[g] = d;
      o.m[g] = m;
    }
    uint8_t* u = reinterpret_cast<uint8_t*>(o.buf);
    for (size_t l = 0; l < 64; l += hn::Lanes(d8)) {
      const auto v = hn::LoadU(d8, b + 4 + l);
      hn::Store(hn::And(v, hn::Set(d8, 0x0F)), d8, u + l);
      hn::Store(hn::ShiftRight<4>(v), d8, u + 64 + l);
    }
  }
};

// q6_k: sixteen 16-element groups with int8 scales, values 0..63 centred on 32.
struct Q6_K {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  static constexpr bool kOffsets = false;
  using Block = Decoded<256, 16>;
  static HWY_INLINE void Decode(const uint8_t* b, Block& o) {
    const D8 d8;
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = Half(b + 208);
    for (int g = 0; g < 16; ++g) o.d[g] = d * sc[g];
    uint8_t* u = reinterpret_cast<uint8_t*>(o.buf);
    const auto low4 = hn::Set(d8, 0x0F), three = hn::Set(d8, 3), centre = hn::Set(d8, 32);
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32) {
      for (size_t l = 0; l < 32; l += hn::Lanes(d8)) {
        const auto a = hn::LoadU(d8, ql + l), c = hn::LoadU(d8, ql + l + 32);
        const auto h = hn::LoadU(d8, qh + l);
        const auto h0 = hn::ShiftLeft<4>(hn::And(h, three));
        const auto h2 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), three));
        const auto h4 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), three));
        const auto h6 = hn::ShiftLeft<4>(hn::ShiftRight<6>(h));
        hn::Store(hn::Sub(hn::Or(hn::And(a, low4), h0), centre), d8, u + n + l);
        hn::Store(hn::Sub(hn::Or(hn::And(c, low4), h2), centre), d8, u + n + l + 32);
        hn::Store(hn::Sub(hn::Or(hn::ShiftRight<4>(a), h4), centre), d8, u + n + l + 64);
        hn::Store(hn::Sub(hn::Or(hn::ShiftRight<4>(c), h6), centre), d8, u + n + l + 96);
      }
    }
  }
};

// xsum[i * groups + g] = sum of x[i][32 g .. 32 g + 31] for rows i < m (one vector sum per
// group, then SumOfLanes).
void GroupSums(const MatmulArgs& a, float* xsum) {
  const DF d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t groups = a.k / kOffsetGroup;
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.x_stride;
    for (int64_t g = 0; g < groups; ++g) {
      auto s = hn::LoadU(d, x + g * kOffsetGroup);
      for (int64_t j = lanes; j < kOffsetGroup; j += lanes) {
        s = hn::Add(s, hn::LoadU(d, x + g * kOffsetGroup + j));
      }
      xsum[i * groups + g] = hn::GetLane(hn::SumOfLanes(d, s));
    }
  }
}

template <class F, int MR>
HWY_INLINE void Column(const MatmulArgs& a, int64_t m0, int64_t n, size_t row_bytes,
                       const float* xsum) {
  const DF d;
  const hn::Rebind<int32_t, DF> di;
  const hn::Rebind<int8_t, DF> d8;
  using V = hn::Vec<DF>;
  using Block = typename F::Block;
  constexpr int kGroup = Block::kGroup;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t offset_groups = a.k / kOffsetGroup;
  const uint8_t* w = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(n) * row_bytes;
  const float* x[MR];
  for (int i = 0; i < MR; ++i) x[i] = a.x + (m0 + i) * a.x_stride;
  V acc[MR];
  float off[MR];
  for (int i = 0; i < MR; ++i) {
    acc[i] = hn::Zero(d);
    off[i] = 0.0f;
  }
  Block blk;
  for (int64_t k0 = 0; k0 < a.k; k0 += F::kBlockElems, w += F::kBlockBytes) {
    for (int off_bytes = 0; off_bytes < F::kBlockBytes; off_bytes += 64) {
      hwy::Prefetch(w + kPrefetchBytes + off_bytes);
    }
    F::Decode(w, blk);
    for (int g = 0; g < Block::kGroups; ++g) {
      const int8_t* q = blk.q + g * kGroup;
      const int64_t k = k0 + g * kGroup;
      V sum[MR];
      const V w0 = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q)));
      for (int i = 0; i < MR; ++i) sum[i] = hn::Mul(w0, hn::LoadU(d, x[i] + k));
      for (int64_t j = lanes; j < kGroup; j += lanes) {
        const V wj = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(d8, q + j)));
        for (int i = 0; i < MR; ++i) sum[i] = hn::MulAdd(wj, hn::LoadU(d, x[i] + k + j), sum[i]);
      }
      const V scale = hn::Set(d, blk.d[g]);
      for (int i = 0; i < MR; ++i) acc[i] = hn::MulAdd(sum[i], scale, acc[i]);
      if constexpr (F::kOffsets) {
        const int64_t og = k / kOffsetGroup;
        for (int i = 0; i < MR; ++i) {
          off[i] = std::fma(blk.m[g], xsum[(m0 + i) * offset_groups + og], off[i]);
        }
      }
    }
  }
  const float bias = a.bias != nullptr ? load_as_f32(a.bias, a.bias_dtype, n) : 0.0f;
  for (int i = 0; i < MR; ++i) {
    float r = hn::GetLane(hn::SumOfLanes(d, acc[i]));
    if constexpr (F::kOffsets) r = r + off[i];
    if (a.bias != nullptr) r = r + bias;
    float& out = a.y[(m0 + i) * a.y_stride + n];
    out = a.accumulate ? out + r : r;
  }
}

template <class F>
void Columns(const MatmulArgs& a, int64_t n_begin, int64_t n_end, const float* xsum) {
  const size_t row_bytes = dtype_row_bytes(a.w_dtype, a.w_stride);
  for (int64_t n = n_begin; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + kRowsPerPass <= a.m; m += kRowsPerPass) {
      Column<F, kRowsPerPass>(a, m, n, row_bytes, xsum);
    }
    switch (a.m - m) {
      case 4:
        Column<F, 4>(a, m, n, row_bytes, xsum);
        break;
      case 3:
        Column<F, 3>(a, m, n, row_bytes, xsum);
        break;
      case 2:
        Column<F, 2>(a, m, n, row_bytes, xsum);
        break;
      case 1:
        Column<F, 1>(a, m, n, row_bytes, xsum);
        break;
      default:
        break;
    }
  }
}

void MatmulQuant(const MatmulArgs& a, int64_t n_begin, int64_t n_end, float* xsum) {
  switch (a.w_dtype) {
    case DType::kQ8_0:
      return Columns<Q8_0>(a, n_begin, n_end, xsum);
    case DType::kQ4_0:
      return Columns<Q4_0>(a, n_begin, n_end, xsum);
    case DType::kQ5_0:
      return Columns<Q5_0>(a, n_begin, n_end, xsum);
    case DType::kQ6_K:
      return Columns<Q6_K>(a, n_begin, n_end, xsum);
    case DType::kInt8:
      return Columns<Int8>(a, n_begin, n_end, xsum);
    default:
      break;
  }
  GroupSums(a, xsum);
  switch (a.w_dtype) {
    case DType::kQ4_1:
      return Columns<Q4_1>(a, n_begin, n_end, xsum);
    case DType::kQ5_1:
      return Columns<Q5_1>(a, n_begin, n_end, xsum);
    case DType::kQ4_K:
      return Columns<QK45<false>>(a, n_begin, n_end, xsum);
    case DType::kQ5_K:
      return Columns<QK45<true>>(a, n_begin, n_end, xsum);
    case DType::kInt4:
      return Columns<Int4>(a, n_begin, n_end, xsum);
    default:
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(MatmulQuant);

void matmul_quant(const MatmulArgs& args, int64_t n_begin, int64_t n_end, float* xsum) {
  HWY_DYNAMIC_DISPATCH(MatmulQuant)(args, n_begin, n_end, xsum);
}

int64_t matmul_quant_scratch(const MatmulArgs& args) { return args.m * (args.k / 32); }

}  // namespace specd::cpu
#endif  // HWY_ONCE
