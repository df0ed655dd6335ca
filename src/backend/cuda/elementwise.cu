// Embedding, RMSNorm, RoPE, SwiGLU and the KV-cache store on CUDA (one row per block or one
// element per thread; every row is computed independently of the others).
#include <algorithm>

#include "backend/cuda/device.cuh"

namespace specd::cuda {
namespace {

unsigned blocks_for(int64_t elements, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((elements + threads - 1) / threads, 1, 65535));
}

__global__ void embedding_kernel(const int32_t* ids, const void* table, DType dtype,
                                 int64_t table_stride, int64_t vocab, int64_t dim, float* out,
                                 int64_t out_stride) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t m = blockIdx.x;
  const int64_t id = ids[m];
  if (id < 0 || id >= vocab) return;  // checked on the host; never read outside the table
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    out[m * out_stride + d] = load_f32(table, dtype, id * table_stride + d);
  }
}

// Sum over the block in a fixed order: per-thread strided sums, a warp shuffle tree, then the
// warps' sums in warp order.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  __shared__ float total;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) s += warp_sums[i];
    total = s;
  }
  __syncthreads();
  return total;
}

constexpr int kNormPerThread = 8;  // row elements a thread keeps in registers

// The row's loads are issued together (kept in registers between the two passes); rows longer
// than kNormPerThread * blockDim.x read the rest in a strided loop. The weights (constant) are
// loaded before the kernel waits for the one that writes x.
__global__ void rms_norm_kernel(const float* x, int64_t x_stride, const void* weight,
                                DType weight_dtype, float eps, float* y, int64_t y_stride,
                                int64_t cols) {
  float wv[kNormPerThread];
#pragma unroll
  for (int i = 0; i < kNormPerThread; ++i) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    wv[i] = d < cols ? load_f32(weight, weight_dtype, d) : 0.0f;
  }
  wait_for_inputs();
  allow_next_kernel();
  const float* row = x + blockIdx.x * x_stride;
  float* out = y + blockIdx.x * y_stride;
  const int64_t held = static_cast<int64_t>(kNormPerThread) * blockDim.x;
  float v[kNormPerThread];
#pragma unroll
  for (int i = 0; i < kNormPerThread; ++i) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    v[i] = d < cols ? row[d] : 0.0f;
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormPerThread; ++i) sum_sq = fmaf(v[i], v[i], sum_sq);
  for (int64_t d = held + threadIdx.x; d < cols; d += blockDim.x)
    sum_sq = fmaf(row[d], row[d], sum_sq);
  const float inv = rsqrtf(block_sum(sum_sq) / static_cast<float>(cols) + eps);
  for (int64_t d = held + threadIdx.x; d < cols; d += blockDim.x) {
    out[d] = row[d] * inv * load_f32(weight, weight_dtype, d);
  }
#pragma unroll
  for (int i = 0; i < kNormPerThread; ++i) {
    const int64_t d = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (d < cols) out[d] = v[i] * inv * wv[i];
  }
}

__global__ void rope_kernel(float* x, int64_t stride, int64_t rows, int n_heads, int half,
                            const int32_t* positions, const float* cos, const float* sin,
                            int64_t table_stride, int64_t table_rows) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t per_row = static_cast<int64_t>(n_heads) * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * per_row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = i / per_row, h = (i % per_row) / half, j = i % half;
    const int64_t pos = positions[m];
    if (pos < 0 || pos >= table_rows) continue;  // checked on the host
    float* head = x + m * stride + h * 2 * half;
    const float c = cos[pos * table_stride + j], s = sin[pos * table_stride + j];
    const float2 y = rotate_pair(head[j], head[j + half], c, s);
    head[j] = y.x;
    head[j + half] = y.y;
  }
}

// out = act(gate) * up, one element per thread (the activations: device.cuh).
__global__ void gated_kernel(Activation act, const float* gate, int64_t gate_stride,
                             const float* up, int64_t up_stride, float* out, int64_t out_stride,
                             int64_t rows, int64_t cols) {
  wait_for_inputs();
  allow_next_kernel();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[r * out_stride + c] = gated(act, gate[r * gate_stride + c], up[r * up_stride + c]);
  }
}

void launch_gated(Activation act, const float* gate, int64_t gate_stride, const float* up,
                  int64_t up_stride, float* out, int64_t out_stride, int64_t rows, int64_t cols,
                  cudaStream_t stream) {
  Launch launch(dim3(blocks_for(rows * cols, 256)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, gated_kernel, act, gate, gate_stride, up, up_stride, out,
                           out_stride, rows, cols),
        "gated_kernel");
}

__global__ void scale_kernel(float* x, int64_t stride, int64_t rows, int64_t cols, float s) {
  wait_for_inputs();
  allow_next_kernel();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[(i / cols) * stride + i % cols] *= s;
  }
}

__global__ void add_kernel(const float* x, int64_t x_stride, float* y, int64_t y_stride,
                           int64_t rows, int64_t cols) {
  wait_for_inputs();
  allow_next_kernel();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    y[r * y_stride + c] += x[r * x_stride + c];
  }
}

__global__ void store_kv_kernel(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                                int64_t m, CacheArgs cache, const int32_t* slots,
                                const int32_t* cache_index) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t width = static_cast<int64_t>(cache.n_kv_heads) * cache.head_dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    const int64_t slot = slots[r], index = cache_index[r];
    if (slot < 0 || slot >= cache.n_slots || index < 0 || index >= cache.capacity) continue;
    const int64_t offset = slot * cache.slot_stride + index * width + c;
    store_f32(cache.k, cache.dtype, offset, k[r * k_stride + c]);
    store_f32(cache.v, cache.dtype, offset, v[r * v_stride + c]);
  }
}

// One thread per rotated pair: q pairs first, then k pairs, which also store their K and V
// elements (both halves) into the cache.
__global__ void rope_store_kv_kernel(RopeStoreArgs a) {
  wait_for_inputs();
  allow_next_kernel();
  const int kv_heads = a.cache.n_kv_heads;
  const int64_t per_row = static_cast<int64_t>(a.n_heads + kv_heads) * a.half;
  const int64_t width = static_cast<int64_t>(kv_heads) * a.cache.head_dim;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < a.m * per_row;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, h = (i % per_row) / a.half, j = i % a.half;
    const int64_t pos = a.positions[r];
    if (pos < 0 || pos >= a.table_rows) continue;  // checked on the host
    const bool is_q = h < a.n_heads;
    const int64_t head = is_q ? h : h - a.n_heads;
    float* x =
        is_q ? a.q + r * a.q_stride + head * 2 * a.half : a.k + r * a.k_stride + head * 2 * a.half;
    const float c = a.cos[pos * a.table_stride + j], s = a.sin[pos * a.table_stride + j];
    const float2 y = rotate_pair(x[j], x[j + a.half], c, s);
    const float y1 = y.x, y2 = y.y;
    x[j] = y1;
    x[j + a.half] = y2;
    if (is_q) continue;
    const int64_t slot = a.slots[r], index = a.cache_index[r];
    if (slot < 0 || slot >= a.cache.n_slots || index < 0 || index >= a.cache.capacity) continue;
    const int64_t at = slot * a.cache.slot_stride + index * width + head * 2 * a.half + j;
    const float* v = a.v + r * a.v_stride + head * 2 * a.half;
    store_f32(a.cache.k, a.cache.dtype, at, y1);
    store_f32(a.cache.k, a.cache.dtype, at + a.half, y2);
    store_f32(a.cache.v, a.cache.dtype, at, v[j]);
    store_f32(a.cache.v, a.cache.dtype, at + a.half, v[j + a.half]);
  }
}

// One block per (row, head): q heads first, then k heads, which also store their K and V into
// the cache. Thread j holds the pair (j, j + half): the head's sum of squares (block_sum), the
// norm as rms_norm_kernel computes it, then the rotation.
__global__ void qk_norm_rope_store_kv_kernel(RopeStoreArgs a) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t r = blockIdx.x;
  const int h = blockIdx.y, j = threadIdx.x, half = a.half;
  const bool is_q = h < a.n_heads, on = j < half;
  const int head = is_q ? h : h - a.n_heads;
  float* x = is_q ? a.q + r * a.q_stride + head * 2 * half : a.k + r * a.k_stride + head * 2 * half;
  const float x1 = on ? x[j] : 0.0f, x2 = on ? x[j + half] : 0.0f;
  const float sum_sq = block_sum(fmaf(x2, x2, x1 * x1));
  const int64_t pos = a.positions[r];
  if (!on || pos < 0 || pos >= a.table_rows) return;  // positions are checked on the host
  const float inv = rsqrtf(sum_sq / static_cast<float>(2 * half) + a.eps);
  const void* w = is_q ? a.q_norm : a.k_norm;
  const DType w_dtype = is_q ? a.q_norm_dtype : a.k_norm_dtype;
  const float n1 = x1 * inv * load_f32(w, w_dtype, j);
  const float n2 = x2 * inv * load_f32(w, w_dtype, j + half);
  const float c = a.cos[pos * a.table_stride + j], s = a.sin[pos * a.table_stride + j];
  const float2 y = rotate_pair(n1, n2, c, s);
  x[j] = y.x;
  x[j + half] = y.y;
  if (is_q) return;
  const int64_t slot = a.slots[r], index = a.cache_index[r];
  if (slot < 0 || slot >= a.cache.n_slots || index < 0 || index >= a.cache.capacity) return;
  const int64_t width = static_cast<int64_t>(a.cache.n_kv_heads) * a.cache.head_dim;
  const int64_t at = slot * a.cache.slot_stride + index * width + head * 2 * half + j;
  const float* v = a.v + r * a.v_stride + head * 2 * half;
  store_f32(a.cache.k, a.cache.dtype, at, y.x);
  store_f32(a.cache.k, a.cache.dtype, at + half, y.y);
  store_f32(a.cache.v, a.cache.dtype, at, v[j]);
  store_f32(a.cache.v, a.cache.dtype, at + half, v[j + half]);
}

}  // namespace

void qk_norm_rope_store_kv(const RopeStoreArgs& a, cudaStream_t stream) {
  const unsigned threads = static_cast<unsigned>((a.half + 31) / 32 * 32);
  Launch launch(dim3(static_cast<unsigned>(a.m), a.n_heads + a.cache.n_kv_heads), dim3(threads), 0,
                stream);
  check(cudaLaunchKernelEx(&launch.config, qk_norm_rope_store_kv_kernel, a),
        "qk_norm_rope_store_kv_kernel");
}

void rope_store_kv(const RopeStoreArgs& a, cudaStream_t stream) {
  const int64_t pairs = a.m * (a.n_heads + a.cache.n_kv_heads) * a.half;
  Launch launch(dim3(blocks_for(pairs, 256)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, rope_store_kv_kernel, a), "rope_store_kv_kernel");
}

void embedding(const int32_t* ids, int64_t m, const void* table, DType table_dtype,
               int64_t table_stride, int64_t vocab, int64_t dim, float* out, int64_t out_stride,
               cudaStream_t stream) {
  Launch launch(dim3(static_cast<unsigned>(m)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, embedding_kernel, ids, table, table_dtype, table_stride,
                           vocab, dim, out, out_stride),
        "embedding_kernel");
}

void rms_norm(const float* x, int64_t x_stride, const void* weight, DType weight_dtype, float eps,
              float* y, int64_t y_stride, int64_t rows, int64_t cols, cudaStream_t stream) {
  // About 4 elements per thread, 32 to 1024 threads.
  const int threads = static_cast<int>(std::clamp<int64_t>((cols / 4 + 31) / 32 * 32, 32, 1024));
  Launch launch(dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, rms_norm_kernel, x, x_stride, weight, weight_dtype, eps,
                           y, y_stride, cols),
        "rms_norm_kernel");
}

void rope(float* x, int64_t stride, int64_t rows, int n_heads, int half, const int32_t* positions,
          const float* cos, const float* sin, int64_t table_stride, int64_t table_rows,
          cudaStream_t stream) {
  Launch launch(dim3(blocks_for(rows * n_heads * half, 256)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, rope_kernel, x, stride, rows, n_heads, half, positions,
                           cos, sin, table_stride, table_rows),
        "rope_kernel");
}

void silu_mul(const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
              float* out, int64_t out_stride, int64_t rows, int64_t cols, cudaStream_t stream) {
  launch_gated(Activation::kSilu, gate, gate_stride, up, up_stride, out, out_stride, rows, cols,
               stream);
}

void gelu_tanh_mul(const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                   float* out, int64_t out_stride, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  launch_gated(Activation::kGeluTanh, gate, gate_stride, up, up_stride, out, out_stride, rows, cols,
               stream);
}

void scale(float* x, int64_t stride, int64_t rows, int64_t cols, float s, cudaStream_t stream) {
  Launch launch(dim3(blocks_for(rows * cols, 256)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, scale_kernel, x, stride, rows, cols, s), "scale_kernel");
}

void add(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t rows, int64_t cols,
         cudaStream_t stream) {
  Launch launch(dim3(blocks_for(rows * cols, 256)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, add_kernel, x, x_stride, y, y_stride, rows, cols),
        "add_kernel");
}

void store_kv(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t m,
              const CacheArgs& cache, const int32_t* slots, const int32_t* cache_index,
              cudaStream_t stream) {
  const int64_t width = static_cast<int64_t>(cache.n_kv_heads) * cache.head_dim;
  Launch launch(dim3(blocks_for(m * width, 256)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, store_kv_kernel, k, k_stride, v, v_stride, m, cache,
                           slots, cache_index),
        "store_kv_kernel");
}

}  // namespace specd::cuda
