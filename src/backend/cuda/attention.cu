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
constexpr int kMaxGroup = 16;     // query heads per KV head handled by one block
constexpr int kMaxHeadDim = 256;
constexpr int kMaxShared = 96 * 1024;  // dynamic shared memory bytes per block

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

__device__ __forceinline__ bool is_visible(const AttentionArgs& a, int64_t m, int64_t j) {
  if (a.mask_start == nullptr) return j <= a.cache_index[m];
  const int64_t start = a.mask_start[m];
  if (j < start) return true;
  return j - start < a.mask_cols && a.mask[m * a.mask_stride + (j - start)] != 0;
}

// Lists row m's visible entries of [begin, end) in increasing order (warp 0, by ballots).
__device__ int visible_entries(const AttentionArgs& a, int64_t m, int64_t begin, int64_t end,
                               int* list) {
  __shared__ int count;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    int n = 0;
    for (int64_t j0 = begin; j0 < end; j0 += 32) {
      const int64_t j = j0 + lane;
      const bool on = j < end && is_visible(a, m, j);
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
__global__ void __launch_bounds__(kThreads)
    attention_chunk_kernel(AttentionArgs a, int64_t chunk, int64_t n_chunks, float* partials) {
  extern __shared__ float shared[];
  const int group = a.n_heads / a.cache.n_kv_heads;
  const int hd = a.cache.head_dim;
  float* q = shared;                     // [group, hd]
  float* scores = q + group * hd;        // [group, chunk]
  int* list = reinterpret_cast<int*>(scores + group * chunk);  // [chunk]
  const int kv_head = blockIdx.x;
  const int64_t m = blockIdx.y, ch = blockIdx.z;
  wait_for_inputs();
  allow_next_kernel();

  const int64_t begin = ch * chunk, end = std::min(begin + chunk, a.cache.capacity);
  const int n = visible_entries(a, m, begin, end, list);
  // partials layout: [M, n_heads, n_chunks, hd + 2] (acc..., max, sum)
  auto partial = [&](int g) {
    return partials + ((m * a.n_heads + kv_head * group + g) * n_chunks + ch) * (hd + 2);
  };
  if (n == 0) {
    for (int g = threadIdx.x; g < group; g += blockDim.x) {
      partial(g)[hd] = -INFINITY;
      partial(g)[hd + 1] = 0.0f;
    }
    return;
  }
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    const int g = i / hd, d = i % hd;
    q[i] = a.q[m * a.q_stride + (kv_head * group + g) * hd + d];
  }
  __syncthreads();

  const int64_t slot = a.slots[m];
  const int64_t entry_stride = static_cast<int64_t>(a.cache.n_kv_heads) * hd;
  const T* keys = static_cast<const T*>(a.cache.k) + slot * a.cache.slot_stride + kv_head * hd;
  const T* values = static_cast<const T*>(a.cache.v) + slot * a.cache.slot_stride + kv_head * hd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  // Scores: one warp per entry, lanes over head_dim, a fixed shuffle tree.
  for (int i = warp; i < n; i += warps) {
    const T* key = keys + list[i] * entry_stride;
    float dot[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) dot[g] = 0.0f;
    for (int d = lane; d < hd; d += 32) {
      const float kd = to_float(key[d]);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g < group) dot[g] = fmaf(q[g * hd + d], kd, dot[g]);
      }
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= group) break;
      float v = dot[g];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) scores[g * chunk + i] = v * a.scale;
    }
  }
  __syncthreads();
  // Max and exponentials per head (thread g handles head g serially: fixed order).
  __shared__ float head_max[kMaxGroup], head_sum[kMaxGroup];
  for (int g = threadIdx.x; g < group; g += blockDim.x) {
    float mx = -INFINITY;
    for (int i = 0; i < n; ++i) mx = fmaxf(mx, scores[g * chunk + i]);
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float p = __expf(scores[g * chunk + i] - mx);
      scores[g * chunk + i] = p;
      sum += p;
    }
    head_max[g] = mx;
    head_sum[g] = sum;
  }
  __syncthreads();
  // p · V: thread per (head, dim), entries in order.
  for (int t = threadIdx.x; t < group * hd; t += blockDim.x) {
    const int g = t / hd, d = t % hd;
    float acc = 0.0f;
#pragma unroll 8
    for (int i = 0; i < n; ++i) {
      const float vd = to_float(values[list[i] * entry_stride + d]);
      acc = fmaf(scores[g * chunk + i], vd, acc);
    }
    partial(g)[d] = acc;
  }
  for (int g = threadIdx.x; g < group; g += blockDim.x) {
    partial(g)[hd] = head_max[g];
    partial(g)[hd + 1] = head_sum[g];
  }
}

// out[m, head] = sum over chunks of exp(max_c - max) acc_c / sum over chunks of exp(max_c - max) sum_c.
__global__ void attention_combine_kernel(AttentionArgs a, int64_t n_chunks, const float* partials) {
  const int hd = a.cache.head_dim;
  const int64_t m = blockIdx.x;
  const int head = blockIdx.y;
  wait_for_inputs();
  allow_next_kernel();
  const float* base = partials + (m * a.n_heads + head) * n_chunks * (hd + 2);
  float mx = -INFINITY;
  for (int64_t c = 0; c < n_chunks; ++c) mx = fmaxf(mx, base[c * (hd + 2) + hd]);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int64_t c = 0; c < n_chunks; ++c) {
      const float* p = base + c * (hd + 2);
      if (p[hd + 1] == 0.0f) continue;
      const float w = __expf(p[hd] - mx);
      num = fmaf(w, p[d], num);
      den = fmaf(w, p[hd + 1], den);
    }
    a.out[m * a.out_stride + static_cast<int64_t>(head) * hd + d] = num / den;
  }
}

template <typename T>
void launch_chunks(const AttentionArgs& a, dim3 grid, size_t shared, int64_t chunk,
                   int64_t n_chunks, float* partials, cudaStream_t stream) {
  static const bool configured = [] {
    check(cudaFuncSetAttribute(attention_chunk_kernel<T>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxShared),
          "cudaFuncSetAttribute(attention)");
    return true;
  }();
  (void)configured;
  Launch launch(grid, dim3(kThreads), shared, stream);
  check(cudaLaunchKernelEx(&launch.config, attention_chunk_kernel<T>, a, chunk, n_chunks, partials),
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
  if (group > kMaxGroup || a.cache.head_dim > kMaxHeadDim) {
    fail_message("cuda attention: " + std::to_string(group) + " query heads per KV head (max " +
                 std::to_string(kMaxGroup) + ") or head dim " + std::to_string(a.cache.head_dim) +
                 " (max " + std::to_string(kMaxHeadDim) + ")");
  }
  const int64_t chunk = attention_chunk(a.cache.capacity);
  const int64_t n_chunks = (a.cache.capacity + chunk - 1) / chunk;
  const size_t shared = (static_cast<size_t>(group) * a.cache.head_dim + group * chunk) * 4 +
                        static_cast<size_t>(chunk) * 4;
  if (shared > static_cast<size_t>(kMaxShared)) {
    fail_message("cuda attention: a chunk of " + std::to_string(chunk) + " cache entries needs " +
                 std::to_string(shared) + " bytes of shared memory (max " +
                 std::to_string(kMaxShared) + ")");
  }
  const dim3 grid(a.cache.n_kv_heads, static_cast<unsigned>(a.m), static_cast<unsigned>(n_chunks));
  switch (a.cache.dtype) {
    case DType::kBF16:
      launch_chunks<__nv_bfloat16>(a, grid, shared, chunk, n_chunks, partials, stream);
      break;
    case DType::kF16:
      launch_chunks<__half>(a, grid, shared, chunk, n_chunks, partials, stream);
      break;
    default:
      launch_chunks<float>(a, grid, shared, chunk, n_chunks, partials, stream);
  }
  Launch combine(dim3(static_cast<unsigned>(a.m), a.n_heads), dim3(std::min(a.cache.head_dim, 256)),
                 0, stream);
  check(cudaLaunchKernelEx(&combine.config, attention_combine_kernel, a, n_chunks,
                           static_cast<const float*>(partials)),
        "attention_combine");
}

}  // namespace specd::cuda
