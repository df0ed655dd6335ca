// Causal attention of many rows of one cache slot (prompt prefill) on tensor cores.
//
// Flash-attention style: a block takes 64 query rows of one query head (16 per warp), walks the
// cache in tiles of kKeys entries at fixed offsets (multiples of kKeys), and keeps a running max,
// sum and output per row. Q·Kᵀ and P·V run as mma.m16n8k16 on bf16 (q and p rounded to bf16,
// f32 accumulation); K and V tiles stream into shared memory with cp.async, double-buffered.
//
// A row's result depends only on its own visible entries: tiles are the same for every row, and a
// tile with nothing visible to a row leaves its max, sum and output exactly as they were. So a
// row gets the same bits whatever other rows share its launch or its block (the prefix cache
// relies on this). It does not match the decode kernel bit for bit: the backend uses this kernel
// only above kSmallBatch rows, as it uses the GEMM for matmuls.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.cuh"
#include "backend/cuda/small_mma.cuh"

namespace specd::cuda {
namespace {

using small_mma::mma_bf16;
using small_mma::pack_bf16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockRows = kWarps * 16;  // query rows per block

template <int D>
constexpr int kKeys = D <= 128 ? 64 : 32;  // cache entries per tile
template <int D>
constexpr int kPitch = D + 8;  // shared row pitch in bf16: 16 bytes of padding, conflict-free

template <int D>
constexpr size_t shared_bytes() {  // q [64][pitch], k and v [2][keys][pitch]
  return static_cast<size_t>(kBlockRows + 4 * kKeys<D>) * kPitch<D> * 2;
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared, or 16 zero bytes when !valid.
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void load_matrices_transposed(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// Rows [row0, row0 + 64) of head blockIdx.y; blocks run the last (longest) row tiles first.
template <int D>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(AttentionArgs a) {
  constexpr int N = kKeys<D>, P = kPitch<D>;
  extern __shared__ __align__(16) unsigned char shared[];
  __nv_bfloat16* q_tile = reinterpret_cast<__nv_bfloat16*>(shared);  // [64][P]
  __nv_bfloat16* k_tiles = q_tile + kBlockRows * P;                  // [2][N][P]
  __nv_bfloat16* v_tiles = k_tiles + 2 * N * P;                      // [2][N][P]
  __shared__ int64_t warp_first[kWarps], warp_last[kWarps];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // mma fragment row group and column pair
  const int64_t row0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBlockRows;
  const int head = blockIdx.y, kv_head = head / (a.n_heads / a.cache.n_kv_heads);
  wait_for_inputs();

  // This thread's two rows (g and g + 8 of its warp): visible entries [first, last].
  int64_t first[2], last[2];
  for (int h = 0; h < 2; ++h) {
    const int64_t r = row0 + warp * 16 + g + h * 8;
    const bool valid = r < a.m;
    last[h] = valid ? a.cache_index[r] : -1;
    first[h] = valid && a.window > 0 ? std::max<int64_t>(0, a.positions[r] - a.window + 1) : 0;
  }
  // The warp's span and the entries visible to all its rows (tiles inside need no mask).
  // (Rows past m count as seeing nothing: last -1, ignored by the minimums.)
  auto or_max = [](int64_t v, int64_t l) { return l < 0 ? INT64_MAX : v; };
  int64_t span_first = std::min(or_max(first[0], last[0]), or_max(first[1], last[1]));
  int64_t span_last = std::max(last[0], last[1]);
  int64_t common_first = std::max(first[0], first[1]);
  int64_t common_last = std::min(or_max(last[0], last[0]), or_max(last[1], last[1]));
  for (int offset = 1; offset < 32; offset *= 2) {
    span_first = std::min(span_first, __shfl_xor_sync(0xffffffffu, span_first, offset));
    span_last = std::max(span_last, __shfl_xor_sync(0xffffffffu, span_last, offset));
    common_first = std::max(common_first, __shfl_xor_sync(0xffffffffu, common_first, offset));
    common_last = std::min(common_last, __shfl_xor_sync(0xffffffffu, common_last, offset));
  }
  if (lane == 0) warp_first[warp] = span_first, warp_last[warp] = span_last;

  // q rows in bf16 (rows past m are zeros).
  for (int i = threadIdx.x; i < kBlockRows * D / 4; i += kThreads) {
    const int row = i / (D / 4), col = i % (D / 4) * 4;
    const int64_t r = row0 + row;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < a.m) v = *reinterpret_cast<const float4*>(a.q + r * a.q_stride + head * D + col);
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(q_tile + row * P + col);
    dst[0] = __floats2bfloat162_rn(v.x, v.y);
    dst[1] = __floats2bfloat162_rn(v.z, v.w);
  }
  __syncthreads();
  int64_t block_first = INT64_MAX, block_last = -1;
  for (int w = 0; w < kWarps; ++w) {
    block_first = std::min(block_first, warp_first[w]);
    block_last = std::max(block_last, warp_last[w]);
  }
  if (block_last < 0) return;  // no rows (cannot happen: the grid covers m)

  const int64_t slot = a.slots[row0];
  const int64_t entry_stride = static_cast<int64_t>(a.cache.n_kv_heads) * D;
  const auto* keys =
      static_cast<const __nv_bfloat16*>(a.cache.k) + slot * a.cache.slot_stride + kv_head * D;
  const auto* values =
      static_cast<const __nv_bfloat16*>(a.cache.v) + slot * a.cache.slot_stride + kv_head * D;
  // Entries past the block's last are zeros, so p·v never meets unwritten cache memory.
  auto load_tile = [&](int64_t tile, int buf) {
    for (int i = threadIdx.x; i < N * D / 8; i += kThreads) {
      const int e = i / (D / 8), col = i % (D / 8) * 8;
      const int64_t j = tile * N + e;
      const bool valid = j <= block_last;
      const int64_t src = (valid ? j : 0) * entry_stride + col;
      copy16_async(k_tiles + (buf * N + e) * P + col, keys + src, valid);
      copy16_async(v_tiles + (buf * N + e) * P + col, values + src, valid);
    }
    commit_copies();
  };

  const float scale_log2 = a.scale * 1.4426950408889634f;
  float o[D / 8][4];  // output rows g and g + 8, dims n8 tile i: (2t, 2t + 1)
  float run_max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  const int64_t tile_begin = block_first / N, tile_end = block_last / N;
  load_tile(tile_begin, 0);
  for (int64_t tile = tile_begin; tile <= tile_end; ++tile) {
    const int buf = static_cast<int>(tile - tile_begin) & 1;
    if (tile < tile_end) {
      load_tile(tile + 1, buf ^ 1);
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();
    const int64_t base = tile * N;
    if (base <= span_last && base + N - 1 >= span_first) {
      const __nv_bfloat16* k_tile = k_tiles + buf * N * P;
      const __nv_bfloat16* v_tile = v_tiles + buf * N * P;
      float s[N / 8][4];  // scores rows g and g + 8, entries n8 tile i: (2t, 2t + 1)
#pragma unroll
      for (int i = 0; i < N / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4];
        load_matrices(qa, q_tile + (warp * 16 + lane % 16) * P + kk * 16 + lane / 16 * 8);
#pragma unroll
        for (int nn = 0; nn < N / 16; ++nn) {
          uint32_t kb[4];
          load_matrices(
              kb, k_tile + (nn * 16 + lane % 8 + lane / 16 * 8) * P + kk * 16 + lane / 8 % 2 * 8);
          mma_bf16(s[2 * nn], qa[0], qa[1], qa[2], qa[3], kb[0], kb[1]);
          mma_bf16(s[2 * nn + 1], qa[0], qa[1], qa[2], qa[3], kb[2], kb[3]);
        }
      }
      // Scaled to log2 units; hidden entries -inf (only tiles not visible to all rows check).
      const bool masked = base < common_first || base + N - 1 > common_last;
#pragma unroll
      for (int i = 0; i < N / 8; ++i) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int h = c / 2;
          const int64_t j = base + i * 8 + 2 * t + c % 2;
          const bool hidden = masked && (j < first[h] || j > last[h]);
          s[i][c] = hidden ? -INFINITY : s[i][c] * scale_log2;
        }
      }
      float rescale[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < N / 8; ++i) mx = fmaxf(mx, fmaxf(s[i][2 * h], s[i][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float new_max = fmaxf(run_max[h], mx);
        // Nothing visible yet: subtract 0 (every p is 0); else the running max.
        const float shift = new_max == -INFINITY ? 0.0f : new_max;
        rescale[h] = exp2f(run_max[h] - shift);
        run_max[h] = new_max;
        float tile_sum = 0.0f;
#pragma unroll
        for (int i = 0; i < N / 8; ++i) {
          s[i][2 * h] = exp2f(s[i][2 * h] - shift);
          s[i][2 * h + 1] = exp2f(s[i][2 * h + 1] - shift);
          tile_sum += s[i][2 * h] + s[i][2 * h + 1];
        }
        sum[h] = sum[h] * rescale[h] + tile_sum;
      }
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        o[i][0] *= rescale[0], o[i][1] *= rescale[0];
        o[i][2] *= rescale[1], o[i][3] *= rescale[1];
      }
      // o += p · v: the score fragments of two n8 tiles are the A fragment of one k16 step.
#pragma unroll
      for (int kk = 0; kk < N / 16; ++kk) {
        const uint32_t pa0 = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        const uint32_t pa1 = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        const uint32_t pa2 = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        const uint32_t pa3 = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
        for (int dn = 0; dn < D / 16; ++dn) {
          uint32_t vb[4];
          load_matrices_transposed(
              vb, v_tile + (kk * 16 + lane % 8 + lane / 8 % 2 * 8) * P + dn * 16 + lane / 16 * 8);
          mma_bf16(o[2 * dn], pa0, pa1, pa2, pa3, vb[0], vb[1]);
          mma_bf16(o[2 * dn + 1], pa0, pa1, pa2, pa3, vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // the buffer is refilled next iteration
  }

  // Row sums over the quad, then out = o / sum.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    const int64_t r = row0 + warp * 16 + g + h * 8;
    if (r >= a.m) continue;
    float* out = a.out + r * a.out_stride + head * D + 2 * t;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      *reinterpret_cast<float2*>(out + i * 8) =
          make_float2(o[i][2 * h] / sum[h], o[i][2 * h + 1] / sum[h]);
    }
  }
}

template <int D>
void launch(const AttentionArgs& a, cudaStream_t stream) {
  static const bool configured = [] {
    check(cudaFuncSetAttribute(prefill_attention_kernel<D>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared_bytes<D>())),
          "cudaFuncSetAttribute(prefill attention)");
    return true;
  }();
  (void)configured;
  const dim3 grid(static_cast<unsigned>((a.m + kBlockRows - 1) / kBlockRows),
                  static_cast<unsigned>(a.n_heads));
  Launch launch(grid, dim3(kThreads), shared_bytes<D>(), stream);
  check(cudaLaunchKernelEx(&launch.config, prefill_attention_kernel<D>, a),
        "prefill_attention_kernel");
}

}  // namespace

bool prefill_attention_supported(const AttentionArgs& a) {
  const int hd = a.cache.head_dim;
  const bool aligned = reinterpret_cast<uintptr_t>(a.q) % 16 == 0 && a.q_stride % 4 == 0 &&
                       reinterpret_cast<uintptr_t>(a.out) % 8 == 0 && a.out_stride % 2 == 0;
  return a.mask_start == nullptr && a.cache.dtype == DType::kBF16 &&
         (hd == 64 || hd == 128 || hd == 256) && a.n_heads % a.cache.n_kv_heads == 0 && aligned;
}

void prefill_attention(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.cache.head_dim) {
    case 64:
      return launch<64>(a, stream);
    case 128:
      return launch<128>(a, stream);
    default:
      return launch<256>(a, stream);
  }
}

}  // namespace specd::cuda
