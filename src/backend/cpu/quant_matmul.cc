// Batch-invariant small-M matmul on block-quantised weights (q8_0, q4_0, q4_1, q5_0, q5_1,
// q4_k, q5_k, q6_k): each weight row is dequantised chunk by chunk into an L1 buffer once for
// a group of rows of x, and the chunk is multiplied into f32 accumulators.
//
// Every (row m, column n) result is computed by the same operations whatever M, the row group
// or the thread's column range: two vector accumulators of f32 lanes, alternating over
// k = 0, L, 2L, ... (L = lanes of the target; chunks are whole 32-element blocks, so there is no
// scalar tail), then their sum, the fixed SumOfLanes reduction, + bias, then y + result.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/quant_matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
//
#include "backend/cpu/kernels.h"
#include "backend/quant_ref.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Elements dequantised at a time (one q*_k block, eight 32-element blocks).
constexpr int64_t kChunk = 256;
// Rows of x per pass over a weight row (2 accumulators each stay in registers).
constexpr int kRowsPerPass = 4;

template <int MR>
HWY_INLINE void Column(const MatmulArgs& a, int64_t m0, int64_t n, size_t row_bytes) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t block = dtype_block_elems(a.w_dtype);
  const size_t block_bytes = dtype_block_bytes(a.w_dtype);
  const uint8_t* w = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(n) * row_bytes;
  HWY_ALIGN float buf[kChunk];
  V acc0[MR], acc1[MR];
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = hn::Zero(d);
  for (int64_t k0 = 0; k0 < a.k; k0 += kChunk) {
    const int64_t len = HWY_MIN(kChunk, a.k - k0);
    dequantize_row(a.w_dtype, w + static_cast<size_t>(k0 / block) * block_bytes, len, buf);
    for (int i = 0; i < MR; ++i) {
      const float* x = a.x + (m0 + i) * a.x_stride + k0;
      int64_t k = 0;
      for (; k + 2 * lanes <= len; k += 2 * lanes) {
        acc0[i] = hn::MulAdd(hn::Load(d, buf + k), hn::LoadU(d, x + k), acc0[i]);
        acc1[i] = hn::MulAdd(hn::Load(d, buf + k + lanes), hn::LoadU(d, x + k + lanes), acc1[i]);
      }
      for (; k < len; k += lanes) {
        acc0[i] = hn::MulAdd(hn::Load(d, buf + k), hn::LoadU(d, x + k), acc0[i]);
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
