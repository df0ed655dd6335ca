// Element-wise CPU kernels (Highway): GELU-tanh gated product, scaling and addition (Gemma),
// and the greedy argmax of a logits row.
// Each element is computed on its own, so results do not depend on the row count or split.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/pointwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
//
#include <cmath>
#include <limits>

#include "backend/cpu/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// gelu_tanh(g) * u for one vector, in PyTorch's order of operations:
// 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 * g³))).
template <class D>
HWY_INLINE hn::Vec<D> GeluTanhMul(D d, hn::Vec<D> g, hn::Vec<D> u) {
  const auto beta = hn::Set(d, 0.7978845608028654f);  // sqrt(2 / pi)
  const auto kappa = hn::Set(d, 0.044715f);
  const auto cube = hn::Mul(hn::Mul(g, g), g);
  const auto inner = hn::Mul(beta, hn::Add(g, hn::Mul(kappa, cube)));
  const auto one_plus = hn::Add(hn::Set(d, 1.0f), hn::CallTanh(d, inner));
  return hn::Mul(hn::Mul(hn::Mul(hn::Set(d, 0.5f), g), one_plus), u);
}

void GeluTanhMulRow(const float* gate, const float* up, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(GeluTanhMul(d, hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, out + i);
  }
  if (i == n) return;
  // Tail: the same vector code on a padded copy.
  HWY_ALIGN float g[64] = {}, u[64] = {};  // 64 >= lanes of any target
  for (int64_t t = i; t < n; ++t) g[t - i] = gate[t], u[t - i] = up[t];
  hn::Store(GeluTanhMul(d, hn::Load(d, g), hn::Load(d, u)), d, g);
  for (int64_t t = i; t < n; ++t) out[t] = g[t - i];
}

void ScaleRow(float* x, int64_t n, float s) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vs = hn::Set(d, s);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
  for (; i < n; ++i) x[i] *= s;
}

void AddRow(const float* x, float* y, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(d, y + i), hn::LoadU(d, x + i)), d, y + i);
  }
  for (; i < n; ++i) y[i] += x[i];
}

// The first index of the largest element of x[0..n), ignoring NaNs, as reference::argmax_rows
// picks it (0 if x[0] is NaN): a vector max over the non-NaN elements, then a scan for the first
// element equal to it.
int64_t ArgmaxRow(const float* x, int64_t n) {
  if (std::isnan(x[0])) return 0;
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto low = hn::Set(d, -std::numeric_limits<float>::infinity());
  auto top = low;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    top = hn::Max(top, hn::IfThenElse(hn::IsNaN(v), low, v));
  }
  float best = hn::GetLane(hn::MaxOfLanes(d, top));
  for (; i < n; ++i) {
    if (x[i] > best) best = x[i];
  }
  const auto vbest = hn::Set(d, best);
  for (i = 0; i + lanes <= n; i += lanes) {
    const intptr_t first = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), vbest));
    if (first >= 0) return i + first;
  }
  for (; i < n; ++i) {
    if (x[i] == best) return i;
  }
  return 0;
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(GeluTanhMulRow);
HWY_EXPORT(ScaleRow);
HWY_EXPORT(AddRow);
HWY_EXPORT(ArgmaxRow);

void gelu_tanh_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluTanhMulRow)(gate, up, out, n);
}

void scale_row(float* x, int64_t n, float s) { HWY_DYNAMIC_DISPATCH(ScaleRow)(x, n, s); }

void add_row(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(AddRow)(x, y, n); }

int64_t argmax_row(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(ArgmaxRow)(x, n); }

}  // namespace specd::cpu
#endif  // HWY_ONCE
