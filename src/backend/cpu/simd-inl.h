// Per-target helpers: widening loads of f32/f16/bf16, and a fixed-order horizontal sum that
// reduces four accumulators at once with the same bits as reducing each alone.
// Include inside HWY_NAMESPACE code after "hwy/highway.h" (re-included once per target).
#if defined(SPECD_BACKEND_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SPECD_BACKEND_CPU_SIMD_INL_H_
#undef SPECD_BACKEND_CPU_SIMD_INL_H_
#else
#define SPECD_BACKEND_CPU_SIMD_INL_H_
#endif

#include <cstring>

#include "core/dtype.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {

// Lanes(d) consecutive elements at p, widened to f32 (unaligned load).
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> LoadWidened(D d, const float* HWY_RESTRICT p) {
  return hwy::HWY_NAMESPACE::LoadU(d, p);
}
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> LoadWidened(D d, const hwy::bfloat16_t* HWY_RESTRICT p) {
  const hwy::HWY_NAMESPACE::Rebind<hwy::bfloat16_t, D> dh;
  return hwy::HWY_NAMESPACE::PromoteTo(d, hwy::HWY_NAMESPACE::LoadU(dh, p));
}
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> LoadWidened(D d, const hwy::float16_t* HWY_RESTRICT p) {
  const hwy::HWY_NAMESPACE::Rebind<hwy::float16_t, D> dh;
  return hwy::HWY_NAMESPACE::PromoteTo(d, hwy::HWY_NAMESPACE::LoadU(dh, p));
}

HWY_INLINE float WidenScalar(float value) { return value; }
HWY_INLINE float WidenScalar(hwy::bfloat16_t value) { return hwy::F32FromBF16(value); }
HWY_INLINE float WidenScalar(hwy::float16_t value) {
  uint16_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return specd::f16_to_f32(bits);
}

#if HWY_TARGET == HWY_SCALAR

// Scalar target: one lane per vector, nothing to fold or transpose.
template <class D>
HWY_INLINE void SumOfLanes4(D /*d*/, hwy::HWY_NAMESPACE::Vec<D> a, hwy::HWY_NAMESPACE::Vec<D> b,
                            hwy::HWY_NAMESPACE::Vec<D> c, hwy::HWY_NAMESPACE::Vec<D> e,
                            float* out) {
  namespace hn = hwy::HWY_NAMESPACE;
  out[0] = hn::GetLane(a);
  out[1] = hn::GetLane(b);
  out[2] = hn::GetLane(c);
  out[3] = hn::GetLane(e);
}

#else

// v folded to 128 bits by adding its upper half to its lower half, repeatedly.
template <class D>
HWY_INLINE auto Fold128(D d, hwy::HWY_NAMESPACE::Vec<D> v) {
  namespace hn = hwy::HWY_NAMESPACE;
  if constexpr (hn::MaxLanes(d) * sizeof(hn::TFromD<D>) > 16) {
    const hn::Half<D> dh;
    return Fold128(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    return v;
  }
}

// out[i] = the lanes of accumulator i summed, for four f32 accumulators: each is folded to 128
// bits, then its 4 lanes are summed as (l0 + l1) + (l2 + l3), the four sums computed together
// after a transpose. out[i] depends only on accumulator i, so a lone accumulator (passed four
// times) gets the same bits as one reduced with three others.
template <class D>
HWY_INLINE void SumOfLanes4(D d, hwy::HWY_NAMESPACE::Vec<D> a, hwy::HWY_NAMESPACE::Vec<D> b,
                            hwy::HWY_NAMESPACE::Vec<D> c, hwy::HWY_NAMESPACE::Vec<D> e,
                            float* out) {
  namespace hn = hwy::HWY_NAMESPACE;
  const auto fa = Fold128(d, a), fb = Fold128(d, b), fc = Fold128(d, c), fe = Fold128(d, e);
  using V4 = decltype(fa);
  const hn::DFromV<V4> d4;
  static_assert(hn::MaxLanes(d4) == 4, "f32 vectors of 128 bits after folding");
  const V4 ab_lo = hn::InterleaveLower(d4, fa, fb), ab_hi = hn::InterleaveUpper(d4, fa, fb);
  const V4 ce_lo = hn::InterleaveLower(d4, fc, fe), ce_hi = hn::InterleaveUpper(d4, fc, fe);
  const V4 t0 = hn::ConcatLowerLower(d4, ce_lo, ab_lo);  // lane 0 of a, b, c, e
  const V4 t1 = hn::ConcatUpperUpper(d4, ce_lo, ab_lo);  // lane 1
  const V4 t2 = hn::ConcatLowerLower(d4, ce_hi, ab_hi);  // lane 2
  const V4 t3 = hn::ConcatUpperUpper(d4, ce_hi, ab_hi);  // lane 3
  hn::StoreU(hn::Add(hn::Add(t0, t1), hn::Add(t2, t3)), d4, out);
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#endif  // SPECD_BACKEND_CPU_SIMD_INL_H_
