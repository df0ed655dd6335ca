// Attention over the KV cache on CUDA: split by fixed chunks of cache entries, then combined.
//
// Block (kv head, row, chunk) computes, for the query heads sharing that KV head, the scores of
// the chunk's visible entries, their max, the sum of exponentials and the unnormalised sum of
// p·V. A second kernel combines the chunks of a (row, head) in chunk order. Chunk boundaries
// depend only on the cache capacity, and a row's arithmetic only on its visible entries, so a
// row gets the same bits in any batch (causal rows and the equivalent mask too).
#include <algorithm>
#include <string>

#include "backend/cuda/device.cuh"

namespace specd::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxGroup = 16;  // query heads per KV head handled by one block
constexpr int kMaxHeadDim = 256;
constexpr int kMaxShared = 96 * 1024;  // dynamic shared memory bytes per block
constexpr int kMaxChunks = 32;         // cache chunks per row (see attention_chunk)

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

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

template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&out)[8]) {
  if constexpr (sizeof(T) == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 4);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = to_float(e[i]);
  }
}

constexpr int kHeadsPerPass = 4;  // query heads accumulated together in the p·V pass

// Lanes that share one cache entry in the score pass: a power of two covering head_dim / 8.
__device__ __forceinline__ int lanes_per_entry(int head_dim) {
  int lanes = 1;
  while (lanes * 8 < head_dim) lanes *= 2;
  return lanes;
}

// head_dim must be a multiple of 8 (checked by the launcher).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_chunk_kernel(AttentionArgs a, int64_t chunk, int64_t n_chunks, int heads,
                           float* partials) {
  extern __shared__ float shared[];
  // This block: `heads` of the query heads sharing one KV head (each head's arithmetic is the
  // same whichever block computes it).
  const int group = a.n_heads / a.cache.n_kv_heads, splits = group / heads;
  const int kv_head = blockIdx.x / splits;
  const int first_head = kv_head * group + (blockIdx.x % splits) * heads;
  const int hd = a.cache.head_dim;
  const int n_dg = hd / 8, n_es = kThreads / n_dg;             // p·V: dim groups x entry subsets
  float* q = shared;                                           // [heads, hd]
  float* scores = q + heads * hd;                              // [heads, chunk]
  int* list = reinterpret_cast<int*>(scores + heads * chunk);  // [chunk]
  float* red = reinterpret_cast<float*>(list + chunk);         // [n_es, kHeadsPerPass, hd]
  __shared__ float head_max[kMaxGroup], head_sum[kMaxGroup];
  const int64_t m = blockIdx.y, ch = blockIdx.z;
  wait_for_inputs();
  allow_next_kernel();

  // Index and query loads issued together (each is a round trip to L2).
  const int64_t slot = a.slots[m];
  const bool causal = a.mask_start == nullptr;
  const int64_t last = causal ? a.cache_index[m] : 0;
  // Sliding window: entries j <= position - window are hidden.
  const int64_t first = a.window > 0 ? std::max<int64_t>(0, a.positions[m] - a.window + 1) : 0;
  const int64_t begin = ch * chunk, end = std::min(begin + chunk, a.cache.capacity);
#pragma unroll 4
  for (int i = threadIdx.x; i < heads * hd; i += blockDim.x) {
    const int g = i / hd, d = i % hd;
    q[i] = a.q[m * a.q_stride + (first_head + g) * hd + d];
  }
  // Causal rows see the contiguous entries [lo, last]; masked rows list theirs.
  const int64_t lo = std::max(begin, first);
  const int n = causal ? static_cast<int>(std::clamp<int64_t>(last + 1 - lo, 0, end - lo))
                       : visible_entries(a, m, first, begin, end, list);
  // partials layout: [M, n_heads, n_chunks, hd + 2] (acc..., max, sum)
  auto partial = [&](int g) {
    return partials + ((m * a.n_heads + first_head + g) * n_chunks + ch) * (hd + 2);
  };
  if (n == 0) {
    for (int g = threadIdx.x; g < heads; g += blockDim.x) {
      partial(g)[hd] = -INFINITY;
      partial(g)[hd + 1] = 0.0f;
    }
    return;
  }
  __syncthreads();

  const int64_t entry_stride = static_cast<int64_t>(a.cache.n_kv_heads) * hd;
  const T* keys = static_cast<const T*>(a.cache.k) + slot * a.cache.slot_stride + kv_head * hd;
  const T* values = static_cast<const T*>(a.cache.v) + slot * a.cache.slot_stride + kv_head * hd;

  // Scores: `lanes` lanes per entry, 8 dims each, added by a fixed butterfly (so an entry's score
  // never depends on the other entries); kUnroll entries per lane group in flight at once.
  {
    const int lanes = lanes_per_entry(hd), per_warp = 32 / lanes;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int sub = lane / lanes, d0 = (lane % lanes) * 8;
    const bool has_dims = d0 < hd;
    constexpr int kUnroll = 4;
    const int step = (kThreads / 32) * per_warp;
    for (int base = 0; base < n; base += step * kUnroll) {
      float k8[kUnroll][8];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * step + warp * per_warp + sub;
        if (i < n && has_dims) {
          load8(keys + (causal ? lo + i : list[i]) * entry_stride + d0, k8[u]);
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) k8[u][e] = 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * step + warp * per_warp + sub;
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g >= heads) break;
          float dot = 0.0f;
          if (has_dims) {
#pragma unroll
            for (int e = 0; e < 8; ++e) dot = fmaf(q[g * hd + d0 + e], k8[u][e], dot);
          }
          for (int offset = lanes / 2; offset > 0; offset /= 2) {
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
          }
          if (d0 == 0 && i < n) scores[g * chunk + i] = dot * a.scale;
        }
      }
    }
  }
  __syncthreads();

  // Softmax pieces per head: a warp per head, lanes over entries, butterfly max and sum.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int g = warp; g < heads; g += kThreads / 32) {
    float mx = -INFINITY;
    for (int i = lane; i < n; i += 32) mx = fmaxf(mx, scores[g * chunk + i]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
    }
    float sum = 0.0f;
    for (int i = lane; i < n; i += 32) {
      const float p = __expf(scores[g * chunk + i] - mx);
      scores[g * chunk + i] = p;
      sum += p;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) {
      head_max[g] = mx;
      head_sum[g] = sum;
    }
  }
  __syncthreads();

  // p·V: thread = (entry subset es, dim group dg); subsets are added in order afterwards.
  const int dg = threadIdx.x % n_dg, es = threadIdx.x / n_dg;
  for (int g0 = 0; g0 < heads; g0 += kHeadsPerPass) {
    if (es < n_es) {
      float acc[kHeadsPerPass][8];
#pragma unroll
      for (int h = 0; h < kHeadsPerPass; ++h) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] = 0.0f;
      }
#pragma unroll 8
      for (int i = es; i < n; i += n_es) {
        float v8[8];
        load8(values + (causal ? lo + i : list[i]) * entry_stride + dg * 8, v8);
#pragma unroll
        for (int h = 0; h < kHeadsPerPass; ++h) {
          if (g0 + h >= heads) break;
          const float p = scores[(g0 + h) * chunk + i];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(p, v8[e], acc[h][e]);
        }
      }
#pragma unroll
      for (int h = 0; h < kHeadsPerPass; ++h) {
#pragma unroll
        for (int e = 0; e < 8; ++e) red[(es * kHeadsPerPass + h) * hd + dg * 8 + e] = acc[h][e];
      }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < kHeadsPerPass * hd; t += blockDim.x) {
      const int h = t / hd, d = t % hd;
      if (g0 + h >= heads) continue;
      float sum = 0.0f;
      for (int e = 0; e < n_es; ++e) sum += red[(e * kHeadsPerPass + h) * hd + d];
      partial(g0 + h)[d] = sum;
    }
    __syncthreads();
  }
  for (int g = threadIdx.x; g < heads; g += blockDim.x) {
    partial(g)[hd] = head_max[g];
    partial(g)[hd + 1] = head_sum[g];
  }
}

// out[m, head] = sum over chunks of exp(max_c - max) acc_c / sum over chunks of exp(max_c - max)
// sum_c.
__global__ void attention_combine_kernel(AttentionArgs a, int64_t n_chunks, const float* partials) {
  __shared__ float weight[kMaxChunks];  // exp(max_c - max), 0 for empty chunks
  __shared__ float sums[kMaxChunks];
  __shared__ float den;
  const int hd = a.cache.head_dim;
  const int64_t m = blockIdx.x;
  const int head = blockIdx.y;
  wait_for_inputs();
  allow_next_kernel();
  const float* base = partials + (m * a.n_heads + head) * n_chunks * (hd + 2);
  for (int c = threadIdx.x; c < n_chunks; c += blockDim.x) {
    weight[c] = base[c * (hd + 2) + hd];
    sums[c] = base[c * (hd + 2) + hd + 1];
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // at most kMaxChunks values: serial, fixed order
    float mx = -INFINITY;
    for (int c = 0; c < n_chunks; ++c) mx = fmaxf(mx, weight[c]);
    float sum = 0.0f;
    for (int c = 0; c < n_chunks; ++c) {
      weight[c] = sums[c] == 0.0f ? 0.0f : __expf(weight[c] - mx);
      sum = fmaf(weight[c], sums[c], sum);
    }
    den = sum;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float num = 0.0f;
#pragma unroll 8
    for (int c = 0; c < n_chunks; ++c) {
      const float acc = base[c * (hd + 2) + d];  // unconditional, so the loads overlap
      if (weight[c] != 0.0f) num = fmaf(weight[c], acc, num);
    }
    a.out[m * a.out_stride + static_cast<int64_t>(head) * hd + d] = num / den;
  }
}

template <typename T>
void launch_chunks(const AttentionArgs& a, dim3 grid, size_t shared, int64_t chunk,
                   int64_t n_chunks, int heads, float* partials, cudaStream_t stream) {
  static const bool configured = [] {
    check(cudaFuncSetAttribute(attention_chunk_kernel<T>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxShared),
          "cudaFuncSetAttribute(attention)");
    return true;
  }();
  (void)configured;
  Launch launch(grid, dim3(kThreads), shared, stream);
  check(cudaLaunchKernelEx(&launch.config, attention_chunk_kernel<T>, a, chunk, n_chunks, heads,
                           partials),
        "attention_chunk_kernel");
}

}  // namespace

int64_t attention_chunk(int64_t capacity) {
  // At most 32 chunks, at least 64 entries each, a multiple of 64.
  const int64_t per = (capacity + 31) / 32;
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
  // Decode: one query head per block, for parallelism (a block's instruction chain, not memory,
  // bounds this small launch). Several rows: a KV head's query heads together, reading each K/V
  // entry once for all of them.
  const int heads = a.m == 1 ? 1 : group;
  const int n_es = kThreads / (a.cache.head_dim / 8);
  const size_t shared = (static_cast<size_t>(heads) * a.cache.head_dim + heads * chunk) * 4 +
                        static_cast<size_t>(chunk) * 4 +
                        static_cast<size_t>(n_es) * kHeadsPerPass * a.cache.head_dim * 4;
  if (shared > static_cast<size_t>(kMaxShared)) {
    fail_message("cuda attention: a chunk of " + std::to_string(chunk) + " cache entries needs " +
                 std::to_string(shared) + " bytes of shared memory (max " +
                 std::to_string(kMaxShared) + ")");
  }
  const dim3 grid(static_cast<unsigned>(a.cache.n_kv_heads * (group / heads)),
                  static_cast<unsigned>(a.m), static_cast<unsigned>(n_chunks));
  switch (a.cache.dtype) {
    case DType::kBF16:
      launch_chunks<__nv_bfloat16>(a, grid, shared, chunk, n_chunks, heads, partials, stream);
      break;
    case DType::kF16:
      launch_chunks<__half>(a, grid, shared, chunk, n_chunks, heads, partials, stream);
      break;
    default:
      launch_chunks<float>(a, grid, shared, chunk, n_chunks, heads, partials, stream);
  }
  Launch combine(dim3(static_cast<unsigned>(a.m), a.n_heads), dim3(std::min(a.cache.head_dim, 256)),
                 0, stream);
  check(cudaLaunchKernelEx(&combine.config, attention_combine_kernel, a, n_chunks,
                           static_cast<const float*>(partials)),
        "attention_combine");
}

}  // namespace specd::cuda
