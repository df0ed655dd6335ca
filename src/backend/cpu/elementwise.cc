// Row-wise CPU kernels (Highway): widening, narrowing, rms_norm, rotary embedding, silu_mul.
// Each row is processed on its own in an order that depends only on its length.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
//
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd-inl.h"
#include "backend/quant_ref.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
void WidenRowsT(const T* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                int64_t dst_stride) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * src_stride;
    float* o = dst + r * dst_stride;
    int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) hn::StoreU(LoadWidened(d, s + c), d, o + c);
    for (; c < cols; ++c) o[c] = WidenScalar(s[c]);
  }
}

void WidenRows(const void* src, DType dtype, int64_t src_stride, int64_t rows, int64_t cols,
               float* dst, int64_t dst_stride) {
  switch (dtype) {
    case DType::kF32:
      return WidenRowsT(static_cast<const float*>(src), src_stride, rows, cols, dst, dst_stride);
    case DType::kF16:
      return WidenRowsT(static_cast<const hwy::float16_t*>(src), src_stride, rows, cols, dst,
                        dst_stride);
    case DType::kBF16:
      return WidenRowsT(static_cast<const hwy::bfloat16_t*>(src), src_stride, rows, cols, dst,
                        dst_stride);
    default:
      break;
  }
}

template <typename T>
void RmsNormT(const float* x, int64_t x_stride, const T* w, float eps, float* y, int64_t y_stride,
              int64_t rows, int64_t cols) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    float* yr = y + r * y_stride;
    // Sum of squares: four lane accumulators, then the leftover vectors, then the scalar tail.
    V acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
    int64_t c = 0;
    for (; c + 4 * lanes <= cols; c += 4 * lanes) {
      const V v0 = hn::LoadU(d, xr + c), v1 = hn::LoadU(d, xr + c + lanes);
      const V v2 = hn::LoadU(d, xr + c + 2 * lanes), v3 = hn::LoadU(d, xr + c + 3 * lanes);
      acc0 = hn::MulAdd(v0, v0, acc0);
      acc1 = hn::MulAdd(v1, v1, acc1);
      acc2 = hn::MulAdd(v2, v2, acc2);
      acc3 = hn::MulAdd(v3, v3, acc3);
    }
    for (; c + lanes <= cols; c += lanes) {
      const V v = hn::LoadU(d, xr + c);
      acc0 = hn::MulAdd(v, v, acc0);
    }
    float tail = 0.0f;
    for (int64_t t = c; t < cols; ++t) tail += xr[t] * xr[t];
    const V sum = hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3));
    const float sum_sq = hn::GetLane(hn::SumOfLanes(d, sum)) + tail;
    const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(cols) + eps);
    const V vinv = hn::Set(d, inv);
    c = 0;
    for (; c + lanes <= cols; c += lanes) {
      const V v = hn::Mul(hn::LoadU(d, xr + c), vinv);
      hn::StoreU(hn::Mul(v, LoadWidened(d, w + c)), d, yr + c);
    }
    for (; c < cols; ++c) yr[c] = (xr[c] * inv) * WidenScalar(w[c]);
  }
}

void RmsNormRows(const float* x, int64_t x_stride, const void* w, DType w_dtype, float eps,
                 float* y, int64_t y_stride, int64_t rows, int64_t cols) {
  switch (w_dtype) {
    case DType::kF32:
      return RmsNormT(x, x_stride, static_cast<const float*>(w), eps, y, y_stride, rows, cols);
    case DType::kF16:
      return RmsNormT(x, x_stride, static_cast<const hwy::float16_t*>(w), eps, y, y_stride, rows,
                      cols);
    case DType::kBF16:
      return RmsNormT(x, x_stride, static_cast<const hwy::bfloat16_t*>(w), eps, y, y_stride, rows,
                      cols);
    default:
      break;
  }
}

void RopeRows(float* x, int64_t x_stride, int64_t rows, int n_heads, int64_t half,
              const int32_t* positions, const float* cos, const float* sin, int64_t table_stride) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    const float* c_row = cos + positions[r] * table_stride;
    const float* s_row = sin + positions[r] * table_stride;
    for (int h = 0; h < n_heads; ++h) {
      float* x1 = x + r * x_stride + h * 2 * half;
      float* x2 = x1 + half;
      int64_t i = 0;
      for (; i + lanes <= half; i += lanes) {
        const V c = hn::LoadU(d, c_row + i), s = hn::LoadU(d, s_row + i);
        const V a = hn::LoadU(d, x1 + i), b = hn::LoadU(d, x2 + i);
        hn::StoreU(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), d, x1 + i);
        hn::StoreU(hn::Add(hn::Mul(b, c), hn::Mul(a, s)), d, x2 + i);
      }
      for (; i < half; ++i) {
        const float a = x1[i], b = x2[i];
        x1[i] = a * c_row[i] - b * s_row[i];
        x2[i] = b * c_row[i] + a * s_row[i];
      }
    }
  }
}

// silu(g) * u for one vector; exp's argument is clamped to its valid range (exp(88) ~ 1.7e38).
template <class D>
HWY_INLINE hn::Vec<D> SiluMul(D d, hn::Vec<D> g, hn::Vec<D> u) {
  const auto neg = hn::Min(hn::Neg(g), hn::Set(d, 88.0f));
  const auto silu = hn::Div(g, hn::Add(hn::Set(d, 1.0f), hn::CallExp(d, neg)));
  return hn::Mul(silu, u);
}

void SiluMulRow(const float* gate, const float* up, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(SiluMul(d, hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, out + i);
  }
  if (i == n) return;
  // Tail: the same vector code on a padded copy.
  HWY_ALIGN float g[64] = {}, u[64] = {};  // 64 >= lanes of any target
  for (int64_t t = i; t < n; ++t) g[t - i] = gate[t], u[t - i] = up[t];
  hn::Store(SiluMul(d, hn::Load(d, g), hn::Load(d, u)), d, g);
  for (int64_t t = i; t < n; ++t) out[t] = g[t - i];
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(WidenRows);
HWY_EXPORT(RmsNormRows);
HWY_EXPORT(RopeRows);
HWY_EXPORT(SiluMulRow);

void widen_rows(const void* src, DType dtype, int64_t src_stride, int64_t rows, int64_t cols,
                float* dst, int64_t dst_stride) {
  if (is_quantized(dtype)) {
    const size_t row_bytes = dtype_row_bytes(dtype, src_stride);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(dtype, static_cast<const char*>(src) + r * row_bytes, cols,
                     dst + r * dst_stride);
    }
    return;
  }
  HWY_DYNAMIC_DISPATCH(WidenRows)(src, dtype, src_stride, rows, cols, dst, dst_stride);
}

void narrow_row(const float* src, int64_t n, DType dtype, void* dst) {
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    default:
      break;
  }
}

void rms_norm_rows(const float* x, int64_t x_stride, const void* w, DType w_dtype, float eps,
                   float* y, int64_t y_stride, int64_t rows, int64_t cols) {
  HWY_DYNAMIC_DISPATCH(RmsNormRows)(x, x_stride, w, w_dtype, eps, y, y_stride, rows, cols);
}

void rope_rows(float* x, int64_t x_stride, int64_t rows, int n_heads, int64_t half,
               const int32_t* positions, const float* cos, const float* sin, int64_t table_stride) {
  HWY_DYNAMIC_DISPATCH(RopeRows)
  (x, x_stride, rows, n_heads, half, positions, cos, sin, table_stride);
}

void silu_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SiluMulRow)(gate, up, out, n);
}

}  // namespace specd::cpu
#endif  // HWY_ONCE
