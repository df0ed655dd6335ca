// CPU attention over the KV cache (Highway): work items of a few rows of one slot times the
// query heads of one or more adjacent KV heads.
//
// For one (row, head): list the visible cache entries in increasing order, score each with a
// dot product (one f32 vector accumulator per entry over head_dim, SumOfLanes4, times scale),
// subtract the max, exponentiate, sum, and accumulate p_i * V_i per head_dim lane over the entries
// in order, then multiply by 1 / sum. The arithmetic depends only on the list of visible entries,
// so causal rows and the equivalent mask give bit-identical results, and so does any batch that
// contains the row. An item of several rows widens each block of keys, then of values, once into
// f32 and runs every (row, head) of the item over it: the loads and conversions are shared, the
// arithmetic of each (row, head) is unchanged. On the AVX512-BF16 path a bf16 cache is scored and
// summed by attention_bf16_dot.cc instead, straight from the cache, in the same walk.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
//
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace specd::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kScoreGroup = 8;            // entries scored together (independent accumulators)
constexpr int kValueChunk = 8;            // head_dim vectors accumulated together in registers
constexpr int64_t kPrefetchEntries = 32;  // cache entries prefetched ahead of the widening

// Prefetches the `bytes` bytes at p (whole cache lines).
HWY_INLINE void PrefetchBytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) hwy::Prefetch(c + i);
}

// scores[g] = scale * dot(q, keys[g]) for G keys of head_dim elements, `stride` apart (widened to
// f32 already, or straight from the cache).
template <int G, typename S>
HWY_INLINE void Scores(const float* HWY_RESTRICT q, const S* HWY_RESTRICT keys, int64_t stride,
                       int64_t head_dim, float scale, float* scores) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t d_vec = head_dim - head_dim % lanes;
  V acc[G];
  for (int g = 0; g < G; ++g) acc[g] = hn::Zero(d);
  for (int64_t i = 0; i < d_vec; i += lanes) {
    const V qv = hn::LoadU(d, q + i);
    for (int g = 0; g < G; ++g) {
      acc[g] = hn::MulAdd(LoadWidened(d, keys + g * stride + i), qv, acc[g]);
    }
  }
  float sums[(G + 3) / 4 * 4];
  for (int g = 0; g < G; g += 4) {
    SumOfLanes4(d, acc[g], acc[HWY_MIN(g + 1, G - 1)], acc[HWY_MIN(g + 2, G - 1)],
                acc[HWY_MIN(g + 3, G - 1)], sums + g);
  }
  if (G % 4 == 0 && d_vec == head_dim) {  // the same products, four at a time
    const hn::CappedTag<float, 4> d4;
    const int step = static_cast<int>(hn::Lanes(d4));
    for (int g = 0; g < G; g += step) {
      hn::StoreU(hn::Mul(hn::LoadU(d4, sums + g), hn::Set(d4, scale)), d4, scores + g);
    }
    return;
  }
  for (int g = 0; g < G; ++g) {
    float r = sums[g];
    if (d_vec < head_dim) {
      float tail = 0.0f;
      for (int64_t i = d_vec; i < head_dim; ++i) tail += q[i] * WidenScalar(keys[g * stride + i]);
      r = r + tail;
    }
    scores[g] = r * scale;
  }
}

// acc[c * lanes ...] = p[i] * values(entries[i]) + acc for C vectors from `offset`, entries in
// order; values(e) = block + (e - first) * width. kRun: the entries are consecutive.
template <int C, bool kRun, typename S>
HWY_INLINE void Values(const S* HWY_RESTRICT block, int64_t first, int64_t width,
                       const int32_t* entries, const float* p, int64_t n, int64_t offset,
                       float* HWY_RESTRICT acc_out) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[C];
  for (int c = 0; c < C; ++c) acc[c] = hn::LoadU(d, acc_out + offset + c * lanes);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = kRun ? entries[0] + i : entries[i];
    const S* v = block + (e - first) * width + offset;
    const V pv = hn::Set(d, p[i]);
    for (int c = 0; c < C; ++c) acc[c] = hn::MulAdd(pv, LoadWidened(d, v + c * lanes), acc[c]);
  }
  for (int c = 0; c < C; ++c) hn::StoreU(acc[c], d, acc_out + offset + c * lanes);
}

// Values() over [offset, d_vec) in chunks of C vectors, then C / 2, ..., 1 (head_dim 64 is four
// vectors of 16 lanes: one chunk of 4 keeps four independent sums in flight, where one vector at a
// time would wait on each multiply-add). Advances offset to d_vec.
template <int C, typename S>
HWY_INLINE void ValueChunks(const S* HWY_RESTRICT block, int64_t first, int64_t width,
                            const int32_t* entries, const float* p, int64_t n, bool run,
                            int64_t d_vec, int64_t& offset, float* HWY_RESTRICT acc_out) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  for (; offset + C * lanes <= d_vec; offset += C * lanes) {
    if (run) {
      Values<C, true>(block, first, width, entries, p, n, offset, acc_out);
    } else {
      Values<C, false>(block, first, width, entries, p, n, offset, acc_out);
    }
  }
  if constexpr (C > 1) {
    ValueChunks<C / 2>(block, first, width, entries, p, n, run, d_vec, offset, acc_out);
  }
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
  // The max (exact in any order): lane-wise over whole vectors, then the rest.
  const int64_t n_vec = n - n % lanes;
  float max_score = p[0];
  if (n_vec > 0) {
    V vmax = hn::LoadU(d, p);
    for (int64_t i = lanes; i < n_vec; i += lanes) vmax = hn::Max(vmax, hn::LoadU(d, p + i));
    max_score = hn::GetLane(hn::MaxOfLanes(d, vmax));
  }
  for (int64_t i = n_vec; i < n; ++i) max_score = std::max(max_score, p[i]);
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

// Prefetches `width` elements of each of the kScoreGroup cache entries from `first` (those below
// `limit`).
template <typename T>
HWY_INLINE void PrefetchEntries(const T* cache, int64_t entry_stride, int64_t first, int64_t limit,
                                int64_t width) {
  const int64_t end = std::min<int64_t>(first + kScoreGroup, limit);
  for (int64_t e = first; e < end; ++e) PrefetchBytes(cache + e * entry_stride, width * sizeof(T));
}

// block[j * width ...] = the first `width` elements of cache entry first + j, widened to f32, for
// j < n, prefetching kPrefetchEntries entries ahead (up to entry `limit`).
template <typename T>
HWY_INLINE void WidenBlock(const T* cache, int64_t entry_stride, int64_t first, int64_t n,
                           int64_t limit, int64_t width, float* HWY_RESTRICT block) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t w_vec = width - width % lanes;
  for (int64_t j = 0; j < n; ++j) {
    if (first + j + kPrefetchEntries < limit) {
      PrefetchBytes(cache + (first + j + kPrefetchEntries) * entry_stride, width * sizeof(T));
    }
    const T* src = cache + (first + j) * entry_stride;
    float* dst = block + j * width;
    int64_t i = 0;
    for (; i < w_vec; i += lanes) hn::StoreU(LoadWidened(d, src + i), d, dst + i);
    for (; i < width; ++i) dst[i] = WidenScalar(src[i]);
  }
}

// Rows [r_begin, r_end) of one slot times query heads [h_begin, h_end), which read KV heads
// [kv_begin, kv_end): the part of each cache entry the item reads is one contiguous run. Query
// (r, h) of the item is number (r - r_begin) * heads + (h - h_begin). kWiden: each block of
// entries is widened to f32 once for all queries (else every query reads the cache itself).
// kDot: scores and value sums come from attention_bf16_dot.cc on the cache itself (kWiden is
// false).
template <typename T, bool kWiden, bool kDot>
void Item(const AttentionArgs& a, int64_t r_begin, int64_t r_end, int h_begin, int h_end,
          const AttentionScratch& s) {
  using S = std::conditional_t<kWiden, float, T>;  // element type the queries read
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t dh = a.head_dim;
  const int64_t rows = r_end - r_begin, heads = h_end - h_begin;
  const int group = a.n_heads / a.n_kv_heads;
  const int kv_begin = h_begin / group, kv_end = (h_end - 1) / group + 1;
  const int64_t width = (kv_end - kv_begin) * dh;  // widened floats per entry
  const int64_t entry_stride = static_cast<int64_t>(a.n_kv_heads) * dh;
  const int64_t base = a.slots[r_begin] * a.slot_stride + kv_begin * dh;
  const T* keys = static_cast<const T*>(a.k) + base;
  const T* values = static_cast<const T*>(a.v) + base;
  const int64_t block_entries = attention_block_entries(width);
  const int64_t stride = kWiden ? width : entry_stride;  // between entries of a block
  const int64_t p_stride = attention_scores_floats(a.capacity) / kMaxQueriesPerItem;

  // Visible entries of each row, and [lo, hi): every entry some row of the item sees.
  int64_t n[kMaxRowsPerItem];
  int64_t lo = a.capacity, hi = 0;
  auto entries_of = [&](int64_t r) { return s.entries + r * a.capacity; };
  for (int64_t r = 0; r < rows; ++r) {
    n[r] = VisibleEntries(a, r_begin + r, entries_of(r));
    if (n[r] == 0) continue;
    lo = std::min<int64_t>(lo, entries_of(r)[0]);
    hi = std::max<int64_t>(hi, entries_of(r)[n[r] - 1] + 1);
  }
  // Entries [b0, b0 + nb) of the keys or values as the queries read them.
  auto block = [&](const T* cache, int64_t b0, int64_t nb) -> const S* {
    if constexpr (kWiden) {
      WidenBlock(cache, entry_stride, b0, nb, hi, width, s.block);
      return s.block;
    } else {
      return cache + b0 * entry_stride;
    }
  };
  auto p_of = [&](int64_t r, int64_t h) { return s.scores + (r * heads + h) * p_stride; };
  auto q_of = [&](int64_t r, int64_t h) {
    return a.q + (r_begin + r) * a.q_stride + (h_begin + h) * dh;
  };
  // Offset of query head h_begin + h's KV head in a widened entry.
  auto kv_offset = [&](int64_t h) { return ((h_begin + h) / group - kv_begin) * dh; };
  const int64_t q16_stride = bf16_x_stride(dh);
  auto q16_of = [&](int64_t r, int64_t h) { return s.q_bf16 + (r * heads + h) * q16_stride; };
  if constexpr (kDot) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < heads; ++h) pack_query_bf16(q_of(r, h), dh, q16_of(r, h));
    }
  }

  // Scores of every entry in [lo, hi) that lies within a row's first and last visible entry, at
  // p[e - lo]; then each row's visible scores are gathered to the front (e_i - lo >= i, so in
  // place), and turned into softmax weights.
  for (int64_t b0 = lo; b0 < hi; b0 += block_entries) {
    const int64_t nb = std::min(block_entries, hi - b0);
    const S* block_keys = kDot ? nullptr : block(keys, b0, nb);
    // Heads outside, rows inside: the queries of one KV head follow each other while its part of
    // the block is in L1.
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t r = 0; r < rows; ++r) {
        if (n[r] == 0) continue;
        const int64_t j_begin = std::max<int64_t>(0, entries_of(r)[0] - b0);
        const int64_t j_end = std::min<int64_t>(nb, entries_of(r)[n[r] - 1] + 1 - b0);
        float* p = p_of(r, h) + (b0 - lo);
        if constexpr (kDot) {
          // The first query fetches the item's part of the entries ahead, as below.
          KeyPrefetch fetch;
          if (r == 0 && h == 0) {
            fetch = {static_cast<int64_t>(width * sizeof(T)), kPrefetchEntries, hi};
          }
          attention_scores_bf16(reinterpret_cast<const uint16_t*>(q16_of(r, h)),
                                reinterpret_cast<const uint16_t*>(
                                    keys + (b0 + j_begin) * entry_stride + kv_offset(h)),
                                entry_stride, j_end - j_begin, dh, a.scale, fetch, b0 + j_begin,
                                p + j_begin);
          continue;
        }
        const S* k = block_keys + kv_offset(h);
        // Read straight from the cache, the first query fetches the item's part of the entries
        // kPrefetchEntries ahead: entries are strided, which the hardware prefetchers miss.
        const bool fetch = !kWiden && r == 0 && h == 0;
        int64_t j = j_begin;
        for (; j + kScoreGroup <= j_end; j += kScoreGroup) {
          if (fetch) PrefetchEntries(keys, entry_stride, b0 + j + kPrefetchEntries, hi, width);
          Scores<kScoreGroup>(q_of(r, h), k + j * stride, stride, dh, a.scale, p + j);
        }
        for (; j < j_end; ++j) Scores<1>(q_of(r, h), k + j * stride, stride, dh, a.scale, p + j);
      }
    }
  }
  float inv_sum[kMaxQueriesPerItem];
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* e = entries_of(r);
    const bool run = n[r] > 0 && e[n[r] - 1] - e[0] == n[r] - 1;  // consecutive entries
    for (int64_t h = 0; h < heads; ++h) {
      float* p = p_of(r, h);
      if (run) {
        if (e[0] != lo) std::memmove(p, p + (e[0] - lo), static_cast<size_t>(n[r]) * sizeof(float));
      } else {
        for (int64_t i = 0; i < n[r]; ++i) p[i] = p[e[i] - lo];
      }
      inv_sum[r * heads + h] = n[r] > 0 ? Softmax(p, n[r]) : 0.0f;
      if constexpr (kDot) pack_weights_bf16(p, n[r]);
    }
  }

  // Value sums, one block of entries at a time, each row resuming where the last block left it.
  const int64_t acc_stride = kDot ? bf16_x_stride(dh) : dh;
  std::fill(s.acc, s.acc + rows * heads * acc_stride, 0.0f);
  const int64_t d_vec = dh - dh % lanes;
  int64_t next[kMaxRowsPerItem] = {};  // first entry (index into the row's list) not yet summed
  for (int64_t b0 = lo; b0 < hi; b0 += block_entries) {
    const int64_t nb = std::min(block_entries, hi - b0);
    const S* block_values = kDot ? nullptr : block(values, b0, nb);
    // Row r sums its list entries [first[r], next[r]) in this block.
    int64_t first[kMaxRowsPerItem];
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* e = entries_of(r);
      first[r] = next[r];
      while (next[r] < n[r] && e[next[r]] < b0 + nb) ++next[r];
      if (!kWiden && r == 0) {  // the values the first row reads next, as for the keys
        for (int64_t i = first[r]; i < next[r]; i += kScoreGroup) {
          PrefetchEntries(values, entry_stride, e[i] + kPrefetchEntries, hi, width);
        }
      }
    }
    for (int64_t h = 0; h < heads; ++h) {  // heads outside, as for the scores
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t* e = entries_of(r);
        const int64_t i0 = first[r], i1 = next[r];
        if (i1 == i0) continue;
        float* acc = s.acc + (r * heads + h) * acc_stride;
        if constexpr (kDot) {  // straight from the cache, in pairs of the row's list
          attention_values_bf16(reinterpret_cast<const uint16_t*>(p_of(r, h)), e, i0, i1, n[r],
                                reinterpret_cast<const uint16_t*>(values + kv_offset(h)),
                                entry_stride, dh, acc);
          continue;
        }
        const bool run = e[i1 - 1] - e[i0] == i1 - 1 - i0;
        const float* p = p_of(r, h) + i0;
        const S* v = block_values + kv_offset(h);
        int64_t offset = 0;
        ValueChunks<kValueChunk>(v, b0, stride, e + i0, p, i1 - i0, run, d_vec, offset, acc);
        for (; offset < dh; ++offset) {
          float sum = acc[offset];
          for (int64_t i = 0; i < i1 - i0; ++i) {
            sum += p[i] * WidenScalar(v[(e[i0 + i] - b0) * stride + offset]);
          }
          acc[offset] = sum;
        }
      }
    }
  }
  // out = sums / total weight (q is no longer read, so out may alias it).
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* acc = s.acc + (r * heads + h) * acc_stride;
      float* out = a.out + (r_begin + r) * a.out_stride + (h_begin + h) * dh;
      const float inv = inv_sum[r * heads + h];
      if constexpr (kDot) {
        attention_values_bf16_finish(acc, dh, inv, out);
        continue;
      }
      const auto vinv = hn::Set(d, inv);
      int64_t i = 0;
      for (; i < d_vec; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, acc + i), vinv), d, out + i);
      for (; i < dh; ++i) out[i] = acc[i] * inv;
    }
  }
}

// Item -> (row block, heads_per_item query heads): items are head-major
// (item = head group * n_row_blocks + block) so that the threads' contiguous shares get similar
// mixes of short and long rows.
template <typename T>
void ItemsT(const AttentionArgs& a, int64_t begin, int64_t end, const AttentionScratch& s) {
  for (int64_t item = begin; item < end; ++item) {
    const int64_t b = item % a.n_row_blocks;
    const int64_t r_begin = a.row_blocks[b], r_end = a.row_blocks[b + 1];
    const int h_begin = static_cast<int>(item / a.n_row_blocks) * a.heads_per_item;
    const int h_end = h_begin + a.heads_per_item;
    // Widening pays when several rows read each entry; a lone row reads the cache directly.
    const bool widen = !std::is_same_v<T, float> && r_end - r_begin > 1;
    if (std::is_same_v<T, hwy::bfloat16_t> && a.bf16_dot) {  // reads the cache as it is
      Item<T, false, true>(a, r_begin, r_end, h_begin, h_end, s);
    } else if (widen) {
      Item<T, true, false>(a, r_begin, r_end, h_begin, h_end, s);
    } else {
      Item<T, false, false>(a, r_begin, r_end, h_begin, h_end, s);
    }
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

int64_t attention_scores_floats(int64_t capacity) {
  // One row per query, room for Softmax to pad it to whole vectors (at most 16 lanes).
  return int64_t{kMaxQueriesPerItem} * ((capacity + 16 + 15) / 16 * 16);
}

int64_t attention_block_entries(int64_t width) {
  // About 32 KiB of widened entries, at least kScoreGroup of them.
  return std::max<int64_t>(8, kAttentionBlockFloats / std::max<int64_t>(1, width) / 8 * 8);
}

int64_t attention_block_floats(int64_t width) { return attention_block_entries(width) * width; }

int64_t attention_acc_floats(int64_t head_dim) {
  return int64_t{kMaxQueriesPerItem} * bf16_x_stride(head_dim);  // room for the dot path's order
}

int64_t attention_query_bf16_elements(int64_t head_dim) {
  return int64_t{kMaxQueriesPerItem} * bf16_x_stride(head_dim);
}

void attention_items(const AttentionArgs& args, int64_t begin, int64_t end,
                     const AttentionScratch& scratch) {
  HWY_DYNAMIC_DISPATCH(AttentionItems)(args, begin, end, scratch);
}

}  // namespace specd::cpu
#endif  // HWY_ONCE
