// Batch-invariant small-M matmul on block-quantised weights (q8_0, q4_0, q4_1, q5_0, q5_1,
// q4_k, q5_k, q6_k): each weight row is unpacked chunk by chunk into bytes plus per-group
// scale and offset (L1) once for a group of rows of x, widened to f32 vectors with one FMA
// each and multiplied into f32 accumulators.
//
// Every (row m, column n) result is computed by the same operations whatever M, the row group
// or the thread's column range: two vector accumulators of f32 lanes, alternating over
// k = 0, L, 2L, ... (L = lanes of the target; chunks are whole 32-element blocks, so there is no
// scalar tail), then their sum, the fixed SumOfLanes reduction, + bias, then y + result.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/quant_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/highway.h"
//
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/quant_ref.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements unpacked at a time (one q*_k block, eight 32-element blocks).
constexpr int64_t kChunk = 256;
// Elements sharing one scale and offset after unpacking (q6_k has 16-element sub-blocks).
constexpr int64_t kGroup = 16;
// Software prefetch distance in the weight bytes.
constexpr size_t kPrefetchBytes = 1024;
// Rows of x per pass over a weight row (2 accumulators each stay in registers).
constexpr int kRowsPerPass = 4;

// A chunk of weights unpacked to bytes u with y = u * scale[g] + offset[g] for element
// g * kGroup + i. Each format's (scale, offset) makes this one FMA of exactly representable
// terms where ggml's formula is a single rounding (q8_0, q4_0, q5_0, q6_k: bit-identical to
// the reference) and at most one ulp away where it rounds twice (q4_1, q5_1, q4_k, q5_k).
struct Unpacked {
  HWY_ALIGN uint8_t u[kChunk];
  float scale[kChunk / kGroup];
  float offset[kChunk / kGroup];
};

// f16 at p (unaligned) -> f32, with the target's conversion instruction where it has one.
HWY_INLINE float Half(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p))));
}

HWY_INLINE void SetGroups(Unpacked& o, int64_t first_elem, int64_t elems, float scale, float offset) {
  for (int64_t g = first_elem / kGroup; g < (first_elem + elems) / kGroup; ++g) {
    o.scale[g] = scale;
    o.offset[g] = offset;
  }
}

// Byte vectors of up to 16 lanes for the unpacking (whole 128-bit vectors on x86).
using D8 = hn::CappedTag<uint8_t, 16>;

// u[j] = q[j] & 0xF, u[j + 16] = q[j] >> 4 (| hi5[j] / hi5[j + 16]) for j < 16.
HWY_INLINE void Nibbles(const uint8_t* HWY_RESTRICT q, uint8_t* HWY_RESTRICT u) {
  const D8 d8;
  for (size_t j = 0; j < 16; j += hn::Lanes(d8)) {
    const auto v = hn::LoadU(d8, q + j);
    hn::StoreU(hn::And(v, hn::Set(d8, 0x0F)), d8, u + j);
    hn::StoreU(hn::ShiftRight<4>(v), d8, u + j + 16);
  }
}

// Byte j of kBitBytes[b] is 16 if bit j of b is set: the 5th bit of q5 values, 8 at a time.
struct BitBytes {
  uint64_t table[256];
  constexpr BitBytes() : table() {
    for (int b = 0; b < 256; ++b) {
      uint64_t v = 0;
      for (int j = 0; j < 8; ++j) v |= static_cast<uint64_t>(((b >> j) & 1) << 4) << (8 * j);
      table[b] = v;
    }
  }
};
constexpr BitBytes kBitBytes;

HWY_INLINE void AddFifthBits(uint32_t qh, uint8_t* HWY_RESTRICT u) {
  for (int g = 0; g < 4; ++g) {
    uint64_t bits = kBitBytes.table[(qh >> (8 * g)) & 0xFF], cur;
    std::memcpy(&cur, u + 8 * g, 8);
    cur |= bits;
    std::memcpy(u + 8 * g, &cur, 8);
  }
}

// Unpacks `len` elements (whole blocks) starting at block pointer b.
void Unpack(DType type, const uint8_t* HWY_RESTRICT b, int64_t len, Unpacked& o) {
  const D8 d8;
  uint8_t* HWY_RESTRICT u = o.u;
  switch (type) {
    case DType::kQ8_0:
      for (int64_t e = 0; e < len; e += 32, b += 34) {
        const float d = Half(b);
        for (size_t j = 0; j < 32; j += hn::Lanes(d8)) {
          hn::StoreU(hn::Xor(hn::LoadU(d8, b + 2 + j), hn::Set(d8, 0x80)), d8, u + e + j);
        }
        SetGroups(o, e, 32, d, -128.0f * d);
      }
      return;
    case DType::kQ4_0:
      for (int64_t e = 0; e < len; e += 32, b += 18) {
        const float d = Half(b);
        Nibbles(b + 2, u + e);
        SetGroups(o, e, 32, d, -8.0f * d);
      }
      return;
    case DType::kQ4_1:
      for (int64_t e = 0; e < len; e += 32, b += 20) {
        Nibbles(b + 4, u + e);
        SetGroups(o, e, 32, Half(b), Half(b + 2));
      }
      return;
    case DType::kQ5_0:
      for (int64_t e = 0; e < len; e += 32, b += 22) {
        const float d = Half(b);
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        Nibbles(b + 6, u + e);
        AddFifthBits(qh, u + e);
        SetGroups(o, e, 32, d, -16.0f * d);
      }
      return;
    case DType::kQ5_1:
      for (int64_t e = 0; e < len; e += 32, b += 24) {
        uint32_t qh;
        std::memcpy(&qh, b + 4, 4);
        Nibbles(b + 8, u + e);
        AddFifthBits(qh, u + e);
        SetGroups(o, e, 32, Half(b), Half(b + 2));
      }
      return;
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = type == DType::kQ5_K;
      const float d = Half(b), dmin = Half(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* q = b + (five ? 48 : 16);
      for (int j = 0; j < 8; j += 2) {
        uint8_t sc, mn;
        k_quant_scale_min(j, scales, &sc, &mn);
        SetGroups(o, 32 * j, 32, d * sc, -(dmin * mn));
        k_quant_scale_min(j + 1, scales, &sc, &mn);
        SetGroups(o, 32 * j + 32, 32, d * sc, -(dmin * mn));
        for (size_t l = 0; l < 32; l += hn::Lanes(d8)) {
          auto v = hn::LoadU(d8, q + l);
          auto lo = hn::And(v, hn::Set(d8, 0x0F)), hi = hn::ShiftRight<4>(v);
          if (five) {
            const auto h = hn::LoadU(d8, qh + l);
            const auto sixteen = hn::Set(d8, 16);
            lo = hn::Or(lo, hn::IfThenElseZero(hn::TestBit(h, hn::Set(d8, uint8_t(1u << j))), sixteen));
            hi = hn::Or(hi, hn::IfThenElseZero(hn::TestBit(h, hn::Set(d8, uint8_t(2u << j))), sixteen));
          }
          hn::StoreU(lo, d8, u + 32 * j + l);
          hn::StoreU(hi, d8, u + 32 * j + 32 + l);
        }
        q += 32;
      }
      return;
    }
    case DType::kQ6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = Half(b + 208);
      const auto low4 = hn::Set(d8, 0x0F), three = hn::Set(d8, 3);
      for (int n = 0; n < 256; n += 128) {
        for (size_t l = 0; l < 32; l += hn::Lanes(d8)) {
          const auto a = hn::LoadU(d8, ql + l), c = hn::LoadU(d8, ql + l + 32);
          const auto h = hn::LoadU(d8, qh + l);
          const auto h0 = hn::ShiftLeft<4>(hn::And(h, three));
          const auto h2 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), three));
          const auto h4 = hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), three));
          const auto h6 = hn::ShiftLeft<4>(hn::ShiftRight<6>(h));
          hn::StoreU(hn::Or(hn::And(a, low4), h0), d8, u + n + l);
          hn::StoreU(hn::Or(hn::And(c, low4), h2), d8, u + n + l + 32);
          hn::StoreU(hn::Or(hn::ShiftRight<4>(a), h4), d8, u + n + l + 64);
          hn::StoreU(hn::Or(hn::ShiftRight<4>(c), h6), d8, u + n + l + 96);
        }
        for (int g = 0; g < 8; ++g) {
          const float a = d * sc[g];
          SetGroups(o, n + 16 * g, 16, a, -32.0f * a);
        }
        ql += 64;
        qh += 32;
        sc += 8;
      }
      return;
    }
    default:
      return;
  }
}

template <int MR>
HWY_INLINE void Column(const MatmulArgs& a, int64_t m0, int64_t n, size_t row_bytes) {
  const hn::ScalableTag<float> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t block = dtype_block_elems(a.w_dtype);
  const size_t block_bytes = dtype_block_bytes(a.w_dtype);
  const uint8_t* w = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(n) * row_bytes;
  Unpacked unpacked;
  V acc0[MR], acc1[MR];
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = hn::Zero(d);
  // The weight vector at element k of the chunk.
  auto weights = [&](int64_t k) HWY_ATTR {
    const V q = hn::ConvertTo(d, hn::PromoteTo(di, hn::LoadU(du8, unpacked.u + k)));
    return hn::MulAdd(q, hn::Set(d, unpacked.scale[k / kGroup]),
                      hn::Set(d, unpacked.offset[k / kGroup]));
  };
  for (int64_t k0 = 0; k0 < a.k; k0 += kChunk) {
    const int64_t len = HWY_MIN(kChunk, a.k - k0);
    const uint8_t* chunk = w + static_cast<size_t>(k0 / block) * block_bytes;
    // Software prefetch kPrefetchBytes ahead (into the next rows at the end of this one): the
    // hardware prefetcher alone leaves DRAM idle. Prefetches do not change the arithmetic.
    const size_t chunk_bytes = static_cast<size_t>(len / block) * block_bytes;
    for (size_t off = 0; off < chunk_bytes; off += 64) hwy::Prefetch(chunk + kPrefetchBytes + off);
    Unpack(a.w_dtype, chunk, len, unpacked);
    const float* x[MR];
    for (int i = 0; i < MR; ++i) x[i] = a.x + (m0 + i) * a.x_stride + k0;
    int64_t k = 0;
    for (; k + 2 * lanes <= len; k += 2 * lanes) {
      const V w0 = weights(k), w1 = weights(k + lanes);
      for (int i = 0; i < MR; ++i) {
        acc0[i] = hn::MulAdd(w0, hn::LoadU(d, x[i] + k), acc0[i]);
        acc1[i] = hn::MulAdd(w1, hn::LoadU(d, x[i] + k + lanes), acc1[i]);
      }
    }
    for (; k < len; k += lanes) {
      const V w0 = weights(k);
      for (int i = 0; i < MR; ++i) acc0[i] = hn::MulAdd(w0, hn::LoadU(d, x[i] + k), acc0[i]);
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

void MatmulQuant(const MatmulArgs& a, int64_t n_begin, int64_t n_end) {
  const size_t row_bytes = dtype_row_bytes(a.w_dtype, a.w_stride);
  for (int64_t n = n_begin; n < n_end; ++n) {
    int64_t m = 0;
    for (; m + kRowsPerPass <= a.m; m += kRowsPerPass) Column<kRowsPerPass>(a, m, n, row_bytes);
    switch (a.m - m) {
      case 3: Column<3>(a, m, n, row_bytes); break;
      case 2: Column<2>(a, m, n, row_bytes); break;
      case 1: Column<1>(a, m, n, row_bytes); break;
      default: break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(MatmulQuant);

void matmul_quant(const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(MatmulQuant)(args, n_begin, n_end);
}

}  // namespace specd::cpu
#endif  // HWY_ONCE
