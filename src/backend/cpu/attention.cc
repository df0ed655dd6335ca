// CPU attention over the KV cache (Highway): one (row, head) per work item, in a fixed order.
//
// For one (row, head): list the visible cache entries in increasing order, score each with a
// dot product (one f32 vector accumulator per entry over head_dim, SumOfLanes4, times scale),
// subtract the max, exponentiate, sum, and accumulate p_i * V_i per head_dim lane over the entries
// in order, then multiply by 1 / sum. The arithmetic depends only on the list of visible entries,
// so causal rows and the equivalent mask give bit-identical results, and so does any batch that
// contains the row.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
//
#include <algorithm>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kScoreGroup = 8;     // entries scored together (independent accumulators)
constexpr int kValueChunk = 8;     // head_dim vectors accumulated together in registers
constexpr int kValuePrefetch = 8;  // entries ahead to prefetch values

// Prefetches the `bytes` bytes at p (whole cache lines).
HWY_INLINE void PrefetchBytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) hwy::Prefetch(c + i);
}

// scores[i] = scale * dot(q, key(entries[i])) for G entries.
template <int G, typename T>
HWY_INLINE void Scores(const float* HWY_RESTRICT q, const T* keys, int64_t entry_stride,
                       const int32_t* entries, int64_t head_dim, float scale, float* scores) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t d_vec = head_dim - head_dim % lanes;
  const T* k[G];
  V acc[G];
  for (int g = 0; g < G; ++g) {
    k[g] = keys + entries[g] * entry_stride;
    acc[g] = hn::Zero(d);
  }
  for (int64_t i = 0; i < d_vec; i += lanes) {
    const V qv = hn::LoadU(d, q + i);
    for (int g = 0; g < G; ++g) acc[g] = hn::MulAdd(LoadWidened(d, k[g] + i), qv, acc[g]);
  }
  float sums[(G + 3) / 4 * 4];
  for (int g = 0; g < G; g += 4) {
    SumOfLanes4(d, acc[g], acc[HWY_MIN(g + 1, G - 1)], acc[HWY_MIN(g + 2, G - 1)],
                acc[HWY_MIN(g + 3, G - 1)], sums + g);
  }
  for (int g = 0; g < G; ++g) {
    float r = sums[g];
    if (d_vec < head_dim) {
      float tail = 0.0f;
      for (int64_t i = d_vec; i < head_dim; ++i) tail += q[i] * WidenScalar(k[g][i]);
      r = r + tail;
    }
    scores[g] = r * scale;
  }
}

// out[c * lanes ...] = sum_i p[i] * value(entries[i]) for C vectors starting at `offset`,
// optionally prefetching the values a few entries ahead.
template <int C, typename T>
HWY_INLINE void Values(const T* values, int64_t entry_stride, const int32_t* entries,
                       const float* p, int64_t n, int64_t offset, float inv_sum, float* out,
                       bool prefetch) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[C];
  for (int c = 0; c < C; ++c) acc[c] = hn::Zero(d);
  for (int64_t i = 0; i < n; ++i) {
    const T* v = values + entries[i] * entry_stride + offset;
    if (prefetch && i + kValuePrefetch < n) {
      PrefetchBytes(values + entries[i + kValuePrefetch] * entry_stride + offset,
                    C * lanes * static_cast<int64_t>(sizeof(T)));
    }
    const V pv = hn::Set(d, p[i]);
    for (int c = 0; c < C; ++c) acc[c] = hn::MulAdd(pv, LoadWidened(d, v + c * lanes), acc[c]);
  }
  const V scale = hn::Set(d, inv_sum);
  for (int c = 0; c < C; ++c) hn::StoreU(hn::Mul(acc[c], scale), d, out + offset + c * lanes);
}

// Visible entries of row m in increasing order; returns their count. With a window, entries
// j <= positions[m] - window are skipped (the masked part of a tree is not windowed).
int64_t VisibleEntries(const AttentionArgs& a, int64_t m, int32_t* entries) {
  int64_t n = 0;
  const int32_t first =
      a.window > 0 ? static_cast<int32_t>(std::max<int64_t>(0, a.positions[m] - a.window + 1)) : 0;
  if (a.mask_start == nullptr) {
    for (int32_t j = first; j <= a.cache_index[m]; ++j) entries[n++] = j;
    return n;
  }
  const int32_t start = a.mask_start[m];
  for (int32_t j = first; j < start; ++j) entries[n++] = j;
  const int32_t* mask = a.mask + m * a.mask_stride;
  for (int64_t j = 0; j < a.mask_cols; ++j) {
    if (mask[j] != 0) entries[n++] = start + static_cast<int32_t>(j);
  }
  return n;
}

// Softmax weights in place: p[i] = exp(p[i] - max) for i < n; returns 1 / sum. Zero-pads p to a
// whole number of vectors.
HWY_INLINE float Softmax(float* p, int64_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  float max_score = p[0];
  for (int64_t i = 1; i < n; ++i) max_score = std::max(max_score, p[i]);
  // Pad with the max, exponentiate, zero the padding, sum lane-wise.
  const int64_t padded = (n + lanes - 1) / lanes * lanes;
  for (int64_t i = n; i < padded; ++i) p[i] = max_score;
  const V vmax = hn::Set(d, max_score);
  V sum = hn::Zero(d);
  for (int64_t i = 0; i < padded; i += lanes) {
    V e = hn::CallExp(d, hn::Sub(hn::LoadU(d, p + i), vmax));
    if (i + lanes > n) e = hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - i)), e);
    hn::StoreU(e, d, p + i);
    sum = hn::Add(sum, e);
  }
  return 1.0f / hn::GetLane(hn::SumOfLanes(d, sum));
}

// Heads [h_begin, h_end) of row m, all reading KV head `kv_head`: each block of keys and values
// is loaded once from memory for all of them. The arithmetic of each (row, head) is the same as
// when it is computed on its own.
template <typename T>
void HeadGroup(const AttentionArgs& a, int64_t m, int kv_head, int h_begin, int h_end,
               const AttentionScratch& scratch) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t dh = a.head_dim;
  const int64_t entry_stride = static_cast<int64_t>(a.n_kv_heads) * dh;
  const int64_t base = a.slots[m] * a.slot_stride + kv_head * dh;
  const T* keys = static_cast<const T*>(a.k) + base;
  const T* values = static_cast<const T*>(a.v) + base;
  int32_t* entries = scratch.entries;
  const int64_t n = VisibleEntries(a, m, entries);
  const int64_t p_stride = (n + 2 * lanes) / lanes * lanes;  // room for Softmax's padding
  auto q_of = [&](int h) { return a.q + m * a.q_stride + h * dh; };
  auto p_of = [&](int h) { return scratch.scores + (h - h_begin) * p_stride; };

  int64_t i = 0;
  for (; i + kScoreGroup <= n; i += kScoreGroup) {
    for (int g = 0; g < kScoreGroup && i + kScoreGroup + g < n; ++g) {
      PrefetchBytes(keys + entries[i + kScoreGroup + g] * entry_stride, dh * sizeof(T));
    }
    for (int h = h_begin; h < h_end; ++h) {
      Scores<kScoreGroup>(q_of(h), keys, entry_stride, entries + i, dh, a.scale, p_of(h) + i);
    }
  }
  for (; i < n; ++i) {
    for (int h = h_begin; h < h_end; ++h) {
      Scores<1>(q_of(h), keys, entry_stride, entries + i, dh, a.scale, p_of(h) + i);
    }
  }
  float inv_sum[kMaxHeadsPerItem];
  for (int h = h_begin; h < h_end; ++h) inv_sum[h - h_begin] = Softmax(p_of(h), n);

  // q is no longer read, so out may alias it.
  auto out_of = [&](int h) { return a.out + m * a.out_stride + h * dh; };
  const int64_t d_vec = dh - dh % lanes;
  int64_t offset = 0;
  for (; offset + kValueChunk * lanes <= d_vec; offset += kValueChunk * lanes) {
    for (int h = h_begin; h < h_end; ++h) {
      Values<kValueChunk>(values, entry_stride, entries, p_of(h), n, offset, inv_sum[h - h_begin],
                          out_of(h), h == h_begin);
    }
  }
  for (; offset + 2 * lanes <= d_vec; offset += 2 * lanes) {
    for (int h = h_begin; h < h_end; ++h) {
      Values<2>(values, entry_stride, entries, p_of(h), n, offset, inv_sum[h - h_begin], out_of(h),
                false);
    }
  }
  for (; offset < d_vec; offset += lanes) {
    for (int h = h_begin; h < h_end; ++h) {
      Values<1>(values, entry_stride, entries, p_of(h), n, offset, inv_sum[h - h_begin], out_of(h),
                false);
    }
  }
  for (; offset < dh; ++offset) {
    for (int h = h_begin; h < h_end; ++h) {
      const float* p = p_of(h);
      float acc = 0.0f;
      for (i = 0; i < n; ++i) {
        acc += p[i] * WidenScalar(values[entries[i] * entry_stride + offset]);
      }
      out_of(h)[offset] = acc * inv_sum[h - h_begin];
    }
  }
}

// Item -> (row, heads_per_item heads of one KV head): items are head-major (item = group * m + row)
// so that the threads' contiguous shares get similar mixes of short and long rows.
template <typename T>
void ItemsT(const AttentionArgs& a, int64_t begin, int64_t end, const AttentionScratch& s) {
  const int group = a.n_heads / a.n_kv_heads;
  const int per_item = a.heads_per_item;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t m = item % a.m;
    const int h_begin = static_cast<int>(item / a.m) * per_item;
    HeadGroup<T>(a, m, h_begin / group, h_begin, h_begin + per_item, s);
  }
}

void AttentionItems(const AttentionArgs& a, int64_t begin, int64_t end,
                    const AttentionScratch& scratch) {
  switch (a.cache_dtype) {
    case DType::kF32:
      return ItemsT<float>(a, begin, end, scratch);
    case DType::kF16:
      return ItemsT<hwy::float16_t>(a, begin, end, scratch);
    case DType::kBF16:
      return ItemsT<hwy::bfloat16_t>(a, begin, end, scratch);
    default:
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace specd::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace specd::cpu {

HWY_EXPORT(AttentionItems);

void attention_items(const AttentionArgs& args, int64_t begin, int64_t end,
                     const AttentionScratch& scratch) {
  HWY_DYNAMIC_DISPATCH(AttentionItems)(args, begin, end, scratch);
}

}  // namespace specd::cpu
#endif  // HWY_ONCE
