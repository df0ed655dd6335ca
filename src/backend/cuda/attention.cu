// Attention over the KV cache on CUDA: split by fixed chunks of cache entries, then combined.
//
// Block (query heads, row, chunk) computes, for 1 or 2 query heads sharing one KV head, the
// scores of the chunk's visible entries, their max, the sum of exponentials and the unnormalised
// sum of p·V. A second kernel combines the chunks of a (row, head) in chunk order. Chunk
// boundaries depend only on the cache capacity, a row's arithmetic only on its visible entries,
// and a head's arithmetic not on how many heads share its block, so a row gets the same bits in
// any batch (causal rows and the equivalent mask too).
//
// Decode is bound by latency, not bytes (a few MB of cache per layer): a block loads the keys and
// values of a whole tile of entries into registers at once, so a short chunk costs one round trip
// to memory, and the softmax needs one block-wide exchange per tile. In a forward's decode step
// (AttentionArgs::settled, one query head per block) the first tile's entries older than the
// forward's own are loaded before the kernel waits for the one that stores the new K/V, so that
// round trip overlaps it.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/device.cuh"
#include "backend/cuda/int_x.cuh"

namespace specd::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxGroup = 64;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxChunks = 32;  // cache chunks per row (see attention_chunk)
// Up to this many rows a block finds the entries new in its forward (those of its slot's rows)
// before waiting, and loads the older ones of its first tile then (AttentionArgs::settled).
constexpr int kMaxEarlyRows = 16;

// Lists masked row m's visible entries of [begin, end) in increasing order (warp 0, by ballots).
// Entries before `first` (the sliding window's start) are hidden; the masked part is not
// windowed.
__device__ int visible_entries(const AttentionArgs& a, int64_t m, int64_t first, int64_t begin,
                               int64_t end, int* list) {
  __shared__ int count;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const int64_t start = a.mask_start[m];
    int n = 0;
    for (int64_t j0 = begin; j0 < end; j0 += 32) {
      const int64_t j = j0 + lane;
      const bool on =
          j < end && ((j >= first && j < start) || (j >= start && j - start < a.mask_cols &&
                                                    a.mask[m * a.mask_stride + (j - start)] != 0));
      const unsigned bits = __ballot_sync(0xffffffffu, on);
      if (on) list[n + __popc(bits & ((1u << lane) - 1u))] = static_cast<int>(j);
      n += __popc(bits);
    }
    if (lane == 0) count = n;
  }
  __syncthreads();
  return count;
}

// 8 cache elements of type T, as loaded (16 bytes for bf16/f16, 32 for f32).
template <typename T>
struct Raw8 {
  uint4 w[sizeof(T) / 2];
};

template <typename T>
__device__ __forceinline__ void load_raw(const T* p, Raw8<T>& r) {
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i) {
    r.w[i] = reinterpret_cast<const uint4*>(p)[i];
  }
}

template <typename T>
__device__ __forceinline__ float element(const Raw8<T>& r, int e) {
  const T* v = reinterpret_cast<const T*>(r.w);
  if constexpr (sizeof(T) == 4) {
    return v[e];
  } else if constexpr (sizeof(T) == 2 && std::is_same_v<T, __half>) {
    return __half2float(v[e]);
  } else {
    return __bfloat162float(v[e]);
  }
}

// Lanes that share one cache entry: a power of two covering head_dim / 8 (8 dims per lane).
__host__ __device__ constexpr int lanes_per_entry(int head_dim) {
  int lanes = 1;
  while (lanes * 8 < head_dim) lanes *= 2;
  return lanes;
}

// Thread layout: lane = (entry slot, dim group); a warp covers 32 / lanes entries per step, the
// block kWarps times as many; a thread holds kSteps steps of a tile (16 bytes of K and of V each
// for 2-byte caches).
template <typename T>
constexpr int kSteps = sizeof(T) == 4 ? 4 : 8;

// head_dim must be a multiple of 8 (checked by the launcher); partials: [M, n_heads, n_chunks,
// hd + 2] (acc..., max, sum).
template <typename T, int kHeads>
__global__ void __launch_bounds__(kThreads)
    attention_chunk_kernel(AttentionArgs a, int64_t chunk, int64_t n_chunks, float* partials) {
  extern __shared__ int list[];  // [chunk] visible entries of masked rows
  __shared__ float tile_max[2][kWarps][kHeads];
  __shared__ float red[kWarps][kHeads][kMaxHeadDim + 1];  // acc..., sum
  constexpr int S = kSteps<T>;
  const int group = a.n_heads / a.cache.n_kv_heads, splits = group / kHeads;
  const int kv_head = blockIdx.x / splits;
  const int first_head = kv_head * group + (blockIdx.x % splits) * kHeads;
  const int hd = a.cache.head_dim, lanes = lanes_per_entry(hd), per_warp = 32 / lanes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slot_in_warp = lane / lanes, d0 = (lane % lanes) * 8;
  const bool has_dims = d0 < hd;
  const int per_step = kWarps * per_warp, tile = S * per_step;
  const int64_t m = blockIdx.y, ch = blockIdx.z;
  const int64_t begin = ch * chunk, end = std::min(begin + chunk, a.cache.capacity);
  const int64_t entry_stride = static_cast<int64_t>(a.cache.n_kv_heads) * hd;
  const bool causal = a.mask_start == nullptr;
  // The row's slot, last visible entry and window start (entries j <= position - window are
  // hidden), read before waiting where the cache's older entries are settled (see AttentionArgs).
  // Only with one query head per block (decode): with two, the tile held across the wait costs
  // the kernel 39 registers, and verification a wave of blocks.
  const bool early = kHeads == 1 && a.settled && causal && a.m <= kMaxEarlyRows;
  int64_t slot = 0, last = 0, first = 0, settled_end = 0;
  auto read_row = [&] {
    slot = a.slots[m];
    last = causal ? a.cache_index[m] : 0;
    first = a.window > 0 ? std::max<int64_t>(0, a.positions[m] - a.window + 1) : 0;
  };
  // Keys and values of the first tile's entries in [from, to): those below settled_end before
  // waiting, the rest after it.
  Raw8<T> k[S] = {}, v[S] = {};
  auto load_first_tile = [&](int64_t lo, int n, const T* keys, const T* values, int64_t from,
                             int64_t to) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int i = s * per_step + warp * per_warp + slot_in_warp;
      if (i < n && has_dims && lo + i >= from && lo + i < to) {
        load_raw(keys + (lo + i) * entry_stride, k[s]);
        load_raw(values + (lo + i) * entry_stride, v[s]);
      }
    }
  };
  auto cache_at = [&](const void* cache) {
    return static_cast<const T*>(cache) + slot * a.cache.slot_stride + kv_head * hd + d0;
  };
  auto visible = [&] {  // causal rows see the contiguous entries [lo, last]
    const int64_t lo = std::max(begin, first);
    return static_cast<int>(std::clamp<int64_t>(last + 1 - lo, 0, end - lo));
  };
  if (early) {
    read_row();
    // This forward's new entries: those of the rows in this row's slot (this row's included).
    settled_end = last;
    for (int64_t r = 0; r < a.m; ++r) {
      if (a.slots[r] == slot) settled_end = std::min<int64_t>(settled_end, a.cache_index[r]);
    }
    load_first_tile(std::max(begin, first), visible(), cache_at(a.cache.k), cache_at(a.cache.v), 0,
                    settled_end);
  }
  wait_for_inputs();
  allow_next_kernel();
  if (!early) read_row();

  float q[kHeads][8];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const float* qh = a.q + m * a.q_stride + static_cast<int64_t>(first_head + h) * hd + d0;
    if (has_dims) {
      float4 lo, hi;
      if ((reinterpret_cast<uintptr_t>(qh) & 15) == 0) {
        lo = reinterpret_cast<const float4*>(qh)[0];
        hi = reinterpret_cast<const float4*>(qh)[1];
      } else {
        lo = make_float4(qh[0], qh[1], qh[2], qh[3]);
        hi = make_float4(qh[4], qh[5], qh[6], qh[7]);
      }
      q[h][0] = lo.x, q[h][1] = lo.y, q[h][2] = lo.z, q[h][3] = lo.w;
      q[h][4] = hi.x, q[h][5] = hi.y, q[h][6] = hi.z, q[h][7] = hi.w;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) q[h][e] = 0.0f;
    }
  }
  // Masked rows list their visible entries.
  const int64_t lo = std::max(begin, first);
  const int n = causal ? visible() : visible_entries(a, m, first, begin, end, list);
  auto partial = [&](int h) {
    return partials + ((m * a.n_heads + first_head + h) * n_chunks + ch) * (hd + 2);
  };
  if (n == 0) {
    if (threadIdx.x < kHeads) {
      partial(threadIdx.x)[hd] = -INFINITY;
      partial(threadIdx.x)[hd + 1] = 0.0f;
    }
    return;
  }

  const T* keys = cache_at(a.cache.k);
  const T* values = cache_at(a.cache.v);
  if (causal) load_first_tile(lo, n, keys, values, settled_end, end);  // not loaded before waiting
  float run_max[kHeads], sum[kHeads], acc[kHeads][8];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    run_max[h] = -INFINITY;
    sum[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.0f;
  }
  int parity = 0;
  // One tile of entries from `base` (k and v: its keys and values) into the running sums.
  auto add_tile = [&](int base, const Raw8<T>(&k)[S], const Raw8<T>(&v)[S]) {
    // Scores: 8 dims per lane, added over the entry's lanes by a fixed butterfly.
    float score[S][kHeads];
    float mx[kHeads];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) mx[h] = -INFINITY;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int i = base + s * per_step + warp * per_warp + slot_in_warp;
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(q[h][e], element(k[s], e), dot);
        for (int offset = lanes / 2; offset > 0; offset /= 2) {
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        score[s][h] = i < n ? __fmul_rn(dot, a.scale) : -INFINITY;
        mx[h] = fmaxf(mx[h], score[s][h]);
      }
    }
    // The tile's max over the block (one exchange; the buffer alternates between tiles).
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      for (int offset = lanes; offset < 32; offset *= 2) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], offset));
      }
      if (lane == 0) tile_max[parity][warp][h] = mx[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      float new_max = run_max[h];
#pragma unroll
      for (int w = 0; w < kWarps; ++w) new_max = fmaxf(new_max, tile_max[parity][w][h]);
      const float rescale = run_max[h] == -INFINITY ? 0.0f : __expf(run_max[h] - new_max);
      run_max[h] = new_max;
      // Explicit roundings: the same arithmetic whatever kHeads (no contraction into FMAs).
      sum[h] = __fmul_rn(sum[h], rescale);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] = __fmul_rn(acc[h][e], rescale);
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const float p = score[s][h] == -INFINITY ? 0.0f : __expf(score[s][h] - new_max);
        sum[h] += p;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(p, element(v[s], e), acc[h][e]);
      }
    }
    parity ^= 1;
  };
  // Causal rows' first tile is loaded above; the other tiles' keys and values here, all loads of
  // a tile in flight at once.
  int base = 0;
  if (causal) {
    add_tile(0, k, v);
    base = tile;
  }
  for (; base < n; base += tile) {
    Raw8<T> kt[S], vt[S];
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int i = base + s * per_step + warp * per_warp + slot_in_warp;
      if (i < n && has_dims) {
        const int64_t j = causal ? lo + i : list[i];
        load_raw(keys + j * entry_stride, kt[s]);
        load_raw(values + j * entry_stride, vt[s]);
      } else {
        kt[s] = Raw8<T>{};
        vt[s] = Raw8<T>{};
      }
    }
    add_tile(base, kt, vt);
  }
  // Entry slots of a warp, then the warps in order.
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    for (int offset = lanes; offset < 32; offset *= 2) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], offset);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] += __shfl_xor_sync(0xffffffffu, acc[h][e], offset);
    }
    if (lane < lanes && has_dims) {
#pragma unroll
      for (int e = 0; e < 8; ++e) red[warp][h][d0 + e] = acc[h][e];
    }
    if (lane == 0) red[warp][h][kMaxHeadDim] = sum[h];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < kHeads * (hd + 1); t += kThreads) {
    const int h = t / (hd + 1), d = t % (hd + 1);
    const int col = d == hd ? kMaxHeadDim : d;
    float total = red[0][h][col];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) total += red[w][h][col];
    partial(h)[d == hd ? hd + 1 : d] = total;
    if (d == hd) partial(h)[hd] = run_max[h];
  }
}

// Writes row m's head `head` (head_dim 128: one block; thread d holds element d) as the int8/int4
// matmul's x parts, with quantize_x_kernel's arithmetic, so the bits are those it would write.
__device__ void quantize_head(const AttentionArgs& a, int64_t m, int head, float value) {
  __shared__ float warp_max[int_x::kBlockK / 32];
  __shared__ int warp_finite[int_x::kBlockK / 32], warp_a[int_x::kBlockK / 32],
      warp_b[int_x::kBlockK / 32];
  const int d = threadIdx.x, lane = d % 32, warp = d / 32;
  float amax = fabsf(value);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, o));
  const bool finite = __all_sync(~0u, isfinite(value));
  if (lane == 0) {
    warp_max[warp] = amax;
    warp_finite[warp] = finite;
  }
  __syncthreads();
  bool all_finite = true;
  for (int w = 0; w < int_x::kBlockK / 32; ++w) {
    amax = fmaxf(amax, warp_max[w]);
    all_finite = all_finite && warp_finite[w] != 0;
  }
  int qa, qb;
  int_x::element_parts(value, int_x::block_inverse(amax, all_finite), qa, qb);
  const int_x::XQuant q = int_x::x_quant_view(a.x_int8, a.m, int64_t{a.n_heads} * int_x::kBlockK);
  const int64_t item = m * q.n_blocks + head;
  q.codes[item * int_x::kXBlockBytes + d] = static_cast<int8_t>(qa);
  q.codes[item * int_x::kXBlockBytes + int_x::kBlockK + d] = static_cast<int8_t>(qb);
  for (int o = 16; o > 0; o >>= 1) {
    qa += __shfl_xor_sync(~0u, qa, o);
    qb += __shfl_xor_sync(~0u, qb, o);
  }
  if (lane == 0) {
    warp_a[warp] = qa;
    warp_b[warp] = qb;
  }
  __syncthreads();
  if (d == 0) {
    int sum_a = 0, sum_b = 0;
    for (int w = 0; w < int_x::kBlockK / 32; ++w) {
      sum_a += warp_a[w];
      sum_b += warp_b[w];
    }
    q.scales[item] = int_x::block_scales(amax, all_finite, sum_a, sum_b);
  }
}

// out[m, head] = sum over chunks of exp(max_c - max) acc_c / sum over chunks of exp(max_c - max)
// sum_c. Every warp derives the chunk weights itself (lane c holds chunk c), so no barrier.
__global__ void attention_combine_kernel(AttentionArgs a, int64_t n_chunks, const float* partials) {
  const int hd = a.cache.head_dim, lane = threadIdx.x % 32;
  const int64_t m = blockIdx.x;
  const int head = blockIdx.y;
  wait_for_inputs();
  allow_next_kernel();
  const float* base = partials + (m * a.n_heads + head) * n_chunks * (hd + 2);
  const int d = threadIdx.x;
  float acc[kMaxChunks];
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {  // unconditional, so the loads overlap
    if (c < n_chunks && d < hd) acc[c] = base[c * (hd + 2) + d];
  }
  const float chunk_max = lane < n_chunks ? base[lane * (hd + 2) + hd] : -INFINITY;
  const float chunk_sum = lane < n_chunks ? base[lane * (hd + 2) + hd + 1] : 0.0f;
  float mx = chunk_max;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
  }
  const float weight = chunk_sum == 0.0f ? 0.0f : __expf(chunk_max - mx);
  float den = __fmul_rn(weight, chunk_sum);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) den += __shfl_xor_sync(0xffffffffu, den, offset);
  float num = 0.0f;
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    if (c >= n_chunks) break;
    const float w = __shfl_sync(0xffffffffu, weight, c);
    if (w != 0.0f && d < hd) num = fmaf(w, acc[c], num);
  }
  const float value = num / den;
  if (d < hd) a.out[m * a.out_stride + static_cast<int64_t>(head) * hd + d] = value;
  if (a.x_int8 != nullptr) quantize_head(a, m, head, value);
}

template <typename T, int kHeads>
void launch_chunks(const AttentionArgs& a, dim3 grid, size_t shared, int64_t chunk,
                   int64_t n_chunks, float* partials, cudaStream_t stream) {
  static const bool configured = [] {
    check(cudaFuncSetAttribute(attention_chunk_kernel<T, kHeads>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
          "cudaFuncSetAttribute(attention)");
    return true;
  }();
  (void)configured;
  Launch launch(grid, dim3(kThreads), shared, stream);
  check(cudaLaunchKernelEx(&launch.config, attention_chunk_kernel<T, kHeads>, a, chunk, n_chunks,
                           partials),
        "attention_chunk_kernel");
}

template <typename T>
void launch_chunks(const AttentionArgs& a, int heads, dim3 grid, size_t shared, int64_t chunk,
                   int64_t n_chunks, float* partials, cudaStream_t stream) {
  switch (heads) {
    case 2:
      return launch_chunks<T, 2>(a, grid, shared, chunk, n_chunks, partials, stream);
    default:
      return launch_chunks<T, 1>(a, grid, shared, chunk, n_chunks, partials, stream);
  }
}

}  // namespace

int64_t attention_chunk(int64_t capacity) {
  // At most kMaxChunks chunks, at least 64 entries each, a multiple of 64.
  const int64_t per = (capacity + kMaxChunks - 1) / kMaxChunks;
  return std::max<int64_t>(64, (per + 63) / 64 * 64);
}

size_t attention_partial_floats(const AttentionArgs& a) {
  const int64_t chunk = attention_chunk(a.cache.capacity);
  const int64_t n_chunks = (a.cache.capacity + chunk - 1) / chunk;
  return static_cast<size_t>(a.m * a.n_heads * n_chunks * (a.cache.head_dim + 2));
}

void attention(const AttentionArgs& a, float* partials, cudaStream_t stream) {
  const int group = a.n_heads / a.cache.n_kv_heads;
  if (group > kMaxGroup || a.cache.head_dim > kMaxHeadDim || a.cache.head_dim % 8 != 0) {
    fail_message("cuda attention: " + std::to_string(group) + " query heads per KV head (max " +
                 std::to_string(kMaxGroup) + ") or head dim " + std::to_string(a.cache.head_dim) +
                 " (a multiple of 8 up to " + std::to_string(kMaxHeadDim) + ")");
  }
  const int64_t chunk = attention_chunk(a.cache.capacity);
  const int64_t n_chunks = (a.cache.capacity + chunk - 1) / chunk;
  const size_t shared = a.mask_start != nullptr ? static_cast<size_t>(chunk) * 4 : 0;
  if (shared > 64 * 1024) {
    fail_message("cuda attention: a chunk of " + std::to_string(chunk) +
                 " cache entries is too long for a masked row (max 16384)");
  }
  // Decode: one query head per block, for parallelism (a block's chain of dependent steps, not
  // memory, bounds this small launch). Several rows: two of a KV head's query heads together,
  // reading each K/V entry once for both (measured on H100 against 1 and 4: verifying 9 rows at
  // a 384-entry context 1.14x a decode step, against 1.15x and 1.16x).
  const int heads = a.m > 1 && group % 2 == 0 ? 2 : 1;
  const dim3 grid(static_cast<unsigned>(a.cache.n_kv_heads * (group / heads)),
                  static_cast<unsigned>(a.m), static_cast<unsigned>(n_chunks));
  switch (a.cache.dtype) {
    case DType::kBF16:
      launch_chunks<__nv_bfloat16>(a, heads, grid, shared, chunk, n_chunks, partials, stream);
      break;
    case DType::kF16:
      launch_chunks<__half>(a, heads, grid, shared, chunk, n_chunks, partials, stream);
      break;
    default:
      launch_chunks<float>(a, heads, grid, shared, chunk, n_chunks, partials, stream);
  }
  if (a.x_int8 != nullptr && a.cache.head_dim != int_x::kBlockK) {
    fail_message("cuda attention: int8 x parts need head dim 128");
  }
  const unsigned combine_threads = static_cast<unsigned>((a.cache.head_dim + 31) / 32 * 32);
  Launch combine(dim3(static_cast<unsigned>(a.m), a.n_heads), dim3(combine_threads), 0, stream);
  check(cudaLaunchKernelEx(&combine.config, attention_combine_kernel, a, n_chunks,
                           static_cast<const float*>(partials)),
        "attention_combine");
}

}  // namespace specd::cuda
