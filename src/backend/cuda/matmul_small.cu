// Small-M matmul (1 to 16 rows): every weight is read once for all rows, batch-invariant.
//
// bf16 weights use tensor cores: a warp multiplies a tile of 16 weight rows by the (up to 16)
// activation rows with mma.m16n8k16, x split into bf16 hi + lo parts so that the product keeps
// about 16 bits of x's mantissa. Each output element is an independent dot product inside the
// mma, padding rows are zeros, and the split of K over warps and blocks depends only on N and K,
// so a row's bits never depend on how many other rows are in the batch. Partial sums of the
// warps (and of the blocks sharing a tile) are added in a fixed order.
#include <algorithm>

#include "backend/cuda/device.cuh"

namespace specd::cuda {
namespace {

constexpr int kWarps = 8;     // warps per block, each on its own K range of the tile
constexpr int kTileN = 16;    // weight rows (output columns) per tile
constexpr int kChunkK = 64;   // k per warp iteration (128 bytes of each weight row)
constexpr int kBatch = 2;     // chunks per batch of weight loads (two batches in flight)
constexpr int kMaxRows = 16;  // activation rows

__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo_k, float hi_k) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo_k, hi_k);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Eight x values [k, k + 8) of one row as bf16 pairs: hi = bf16(x), lo = bf16(x - hi).
struct XPairs {
  uint32_t hi[4], lo[4];
};
__device__ __forceinline__ XPairs load_x(const float* row, bool valid) {
  XPairs out;
  if (!valid) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out.hi[i] = out.lo[i] = 0;
    return out;
  }
  const float4 a = *reinterpret_cast<const float4*>(row);
  const float4 b = *reinterpret_cast<const float4*>(row + 4);
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float h0 = __bfloat162float(__float2bfloat16_rn(v[2 * i]));
    const float h1 = __bfloat162float(__float2bfloat16_rn(v[2 * i + 1]));
    out.hi[i] = pack_bf16(h0, h1);
    out.lo[i] = pack_bf16(v[2 * i] - h0, v[2 * i + 1] - h1);
  }
  return out;
}

// acc += W[16 rows, 8 k] · x[8 rows, 8 k]ᵀ for one 8-wide k piece (two mma k-halves, hi and lo).
// p: weight row g, q: weight row g + 8 (8 bf16 each, at the same k as x).
__device__ __forceinline__ void mma_piece(float (&acc)[4], const uint4& p, const uint4& q,
                                          const XPairs& x) {
  mma_bf16(acc, p.x, q.x, p.y, q.y, x.hi[0], x.hi[1]);
  mma_bf16(acc, p.x, q.x, p.y, q.y, x.lo[0], x.lo[1]);
  mma_bf16(acc, p.z, q.z, p.w, q.w, x.hi[2], x.hi[3]);
  mma_bf16(acc, p.z, q.z, p.w, q.w, x.lo[2], x.lo[3]);
}

__device__ __forceinline__ float epilogue(const MatmulArgs& a, int64_t row, int64_t col, float v) {
  if (a.bias != nullptr) v += load_f32(a.bias, a.bias_dtype, col);
  if (a.accumulate) v = a.y[row * a.y_stride + col] + v;
  return v;
}

// Weight pieces of one batch (kBatch chunks): p = weight row g, q = weight row g + 8.
struct WeightBatch {
  uint4 p[kBatch][2], q[kBatch][2];
};

struct TileCursor {
  const __nv_bfloat16* w0;
  const __nv_bfloat16* w1;
  bool ok0, ok1;
  int64_t first, splits, n_chunks, k;
  int c;
  // k offset of piece h of chunk u in batch b, or -1 past the end.
  __device__ __forceinline__ int64_t offset(int64_t b, int u, int h) const {
    const int64_t j = first + (b * kBatch + u) * splits;
    // The 4 lanes of a row read 64 contiguous bytes per piece (two whole 32-byte sectors).
    const int64_t kk = j * kChunkK + h * 32 + c * 8;
    return j < n_chunks && kk < k ? kk : -1;
  }
};

__device__ __forceinline__ void load_batch(WeightBatch& wb, const TileCursor& t, int64_t b) {
#pragma unroll
  for (int u = 0; u < kBatch; ++u) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t kk = t.offset(b, u, h);
      wb.p[u][h] = kk >= 0 && t.ok0 ? load_stream(t.w0 + kk) : make_uint4(0, 0, 0, 0);
      wb.q[u][h] = kk >= 0 && t.ok1 ? load_stream(t.w1 + kk) : make_uint4(0, 0, 0, 0);
    }
  }
}

template <bool kTwoTiles>
__device__ __forceinline__ void mma_batch(float (&acc0)[4], float (&acc1)[4], const WeightBatch& wb,
                                          const TileCursor& t, int64_t b, const float* x0,
                                          const float* x1, bool row0, bool row1) {
#pragma unroll
  for (int u = 0; u < kBatch; ++u) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t kk = t.offset(b, u, h);
      const int64_t at = kk >= 0 ? kk : 0;
      mma_piece(acc0, wb.p[u][h], wb.q[u][h], load_x(x0 + at, kk >= 0 && row0));
      if constexpr (kTwoTiles) {
        mma_piece(acc1, wb.p[u][h], wb.q[u][h], load_x(x1 + at, kk >= 0 && row1));
      }
    }
  }
}

// Blocks loop over the output tiles of every matmul of the group (grid.x blocks per split);
// each warp streams its chunks of a tile with two batches of weight loads in flight (one is
// multiplied while the other arrives), and loads the next tile's first batches before it
// reduces the current one.
template <bool kTwoTiles>
__global__ void __launch_bounds__(kWarps * 32, 2)
    small_mma_kernel(MatmulGroup group, int block_splits, float* partials, unsigned* tickets) {
  __shared__ float reduce[kWarps][kMaxRows][kTileN];
  __shared__ bool last_block;
  const MatmulArgs& a0 = group.part[0];  // x, m, k and the weight dtype are shared
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int64_t split = blockIdx.y;
  const int t = threadIdx.x;  // in the reduction: one (x row, column) per thread, 16 x 16
  const int xr = t / kTileN, col = t % kTileN;
  const int64_t tiles = group.tile_end[group.count - 1];
  TileCursor cur;
  cur.splits = static_cast<int64_t>(block_splits) * kWarps;
  cur.first = split * kWarps + warp;
  cur.n_chunks = (a0.k + kChunkK - 1) / kChunkK;
  cur.k = a0.k;
  cur.c = c;
  const int64_t mine = cur.first < cur.n_chunks
                           ? (cur.n_chunks - cur.first + cur.splits - 1) / cur.splits
                           : 0;  // chunks of this warp
  const int64_t batches = (mine + kBatch - 1) / kBatch;
  // Points the cursor at `tile`; returns its part of the group and its first output column.
  auto seek = [&](int64_t tile, int* part, int64_t* n0) {
    int p = 0;
    while (tile >= group.tile_end[p]) ++p;
    const MatmulArgs& a = group.part[p];
    *part = p;
    *n0 = (tile - (p == 0 ? 0 : group.tile_end[p - 1])) * kTileN;
    const auto* w = static_cast<const __nv_bfloat16*>(a.w);
    const int64_t row0 = *n0 + g, row1 = row0 + 8;
    cur.w0 = w + std::min<int64_t>(row0, a.n - 1) * a.w_stride;
    cur.w1 = w + std::min<int64_t>(row1, a.n - 1) * a.w_stride;
    cur.ok0 = row0 < a.n;
    cur.ok1 = row1 < a.n;
  };

  WeightBatch even, odd;
  int part = 0;
  int64_t n0 = 0;
  int64_t tile = blockIdx.x;
  if (tile < tiles) {
    seek(tile, &part, &n0);
    load_batch(even, cur, 0);  // weights do not depend on the previous kernel
    load_batch(odd, cur, 1);
  }
  wait_for_inputs();
  allow_next_kernel();
  const float* x0 = a0.x + static_cast<int64_t>(g) * a0.x_stride;
  const float* x1 = a0.x + static_cast<int64_t>(g + 8) * a0.x_stride;
  const bool has0 = g < a0.m, has1 = g + 8 < a0.m;

  while (tile < tiles) {
    float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < batches; b += 2) {
      mma_batch<kTwoTiles>(acc0, acc1, even, cur, b, x0, x1, has0, has1);
      if (b + 2 < batches) load_batch(even, cur, b + 2);
      if (b + 1 < batches) {
        mma_batch<kTwoTiles>(acc0, acc1, odd, cur, b + 1, x0, x1, has0, has1);
        if (b + 3 < batches) load_batch(odd, cur, b + 3);
      }
    }
    const MatmulArgs& a = group.part[part];
    const int64_t n = n0 + col, this_tile = tile;
    tile += gridDim.x;
    if (tile < tiles) {  // the next tile's loads overlap this tile's reduction
      seek(tile, &part, &n0);
      load_batch(even, cur, 0);
      load_batch(odd, cur, 1);
    }

    // acc element e sits at weight row g (+8 for e >= 2) and x row 2c + (e & 1) (+8 for acc1).
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int wr = g + (e >= 2 ? 8 : 0), x_row = 2 * c + (e & 1);
      reduce[warp][x_row][wr] = acc0[e];
      reduce[warp][x_row + 8][wr] = kTwoTiles ? acc1[e] : 0.0f;
    }
    __syncthreads();
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v += reduce[i][xr][col];
    const bool write = xr < a.m && n < a.n;
    if (block_splits == 1) {
      if (write) a.y[xr * a.y_stride + n] = epilogue(a, xr, n, v);
    } else {
      // Several blocks share this tile: publish the partial; the last block to finish adds the
      // partials in split order (the same order whichever block arrives last).
      float* tile_partials = partials + this_tile * block_splits * (kMaxRows * kTileN);
      tile_partials[split * (kMaxRows * kTileN) + t] = v;
      __threadfence();
      __syncthreads();
      if (t == 0) {
        last_block = atomicAdd(&tickets[this_tile], 1u) == static_cast<unsigned>(block_splits - 1);
      }
      __syncthreads();
      if (last_block) {
        __threadfence();
        float sum = 0.0f;
        for (int s = 0; s < block_splits; ++s) {
          sum += __ldcg(&tile_partials[s * (kMaxRows * kTileN) + t]);
        }
        if (write) a.y[xr * a.y_stride + n] = epilogue(a, xr, n, sum);
        if (t == 0) tickets[this_tile] = 0;
      }
    }
    __syncthreads();  // `reduce` and `last_block` are reused by the next tile
  }
}

// Any weight dtype, any alignment: one warp per output column, lanes over K, a fixed shuffle
// tree per row (rows are independent, so also batch-invariant). Up to 16 rows per launch.
__global__ void __launch_bounds__(256) small_generic_kernel(MatmulArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  wait_for_inputs();
  allow_next_kernel();
  if (n >= a.n) return;
  float acc[kMaxRows];
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m) acc[m] = 0.0f;
  for (int64_t k = lane; k < a.k; k += 32) {
    const float wv = load_f32(a.w, a.w_dtype, n * a.w_stride + k);
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
      if (m < a.m) acc[m] = fmaf(wv, a.x[m * a.x_stride + k], acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < kMaxRows; ++m) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], offset);
    }
    if (lane == 0 && m < a.m) a.y[m * a.y_stride + n] = epilogue(a, m, n, acc[m]);
  }
}

}  // namespace

bool small_tensor_cores(const MatmulArgs& a) {
  return a.w_dtype == DType::kBF16 && a.k % 8 == 0 && a.w_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(a.w) % 16 == 0 && a.x_stride % 4 == 0 &&
         reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
}

SmallMatmulPlan plan_small_matmul(const MatmulGroup& group, int multiprocessors) {
  SmallMatmulPlan plan;
  plan.tensor_cores = true;
  for (int p = 0; p < group.count; ++p) {
    plan.tensor_cores = plan.tensor_cores && small_tensor_cores(group.part[p]);
  }
  plan.tiles = group.tile_end[group.count - 1];
  if (!plan.tensor_cores) return plan;
  // One wave of blocks (two per multiprocessor) that loop over the tiles; tiles are split over
  // several blocks when there are fewer tiles than that, keeping at least 2 chunks per warp.
  const int64_t wave = 2 * static_cast<int64_t>(multiprocessors);
  const int64_t n_chunks = (group.part[0].k + kChunkK - 1) / kChunkK;
  const int64_t by_work = std::max<int64_t>(1, n_chunks / (kWarps * 2));
  plan.block_splits = static_cast<int>(
      std::clamp<int64_t>((wave + plan.tiles / 2) / plan.tiles, 1, std::min<int64_t>(by_work, 64)));
  plan.grid_x = std::min<int64_t>(plan.tiles, (wave + plan.block_splits - 1) / plan.block_splits);
  return plan;
}

size_t small_matmul_partial_floats(const SmallMatmulPlan& plan) {
  if (!plan.tensor_cores || plan.block_splits == 1) return 0;
  return static_cast<size_t>(plan.tiles) * plan.block_splits * kMaxRows * kTileN;
}

void matmul_small(const MatmulGroup& group, const SmallMatmulPlan& plan,
                  const MatmulScratch& scratch, cudaStream_t stream) {
  if (plan.tensor_cores) {
    Launch launch(dim3(static_cast<unsigned>(plan.grid_x), plan.block_splits), dim3(kWarps * 32), 0,
                  stream);
    auto kernel = group.part[0].m > 8 ? small_mma_kernel<true> : small_mma_kernel<false>;
    check(cudaLaunchKernelEx(&launch.config, kernel, group, plan.block_splits, scratch.partials,
                             scratch.tickets),
          "small_mma_kernel");
    return;
  }
  // The generic kernel takes one matmul and 16 rows at a time (rows are independent).
  for (int p = 0; p < group.count; ++p) {
    const MatmulArgs& a = group.part[p];
    if (a.n == 0) continue;
    for (int64_t m0 = 0; m0 < a.m; m0 += kMaxRows) {
      MatmulArgs part = a;
      part.x = a.x + m0 * a.x_stride;
      part.y = a.y + m0 * a.y_stride;
      part.m = std::min<int64_t>(kMaxRows, a.m - m0);
      Launch launch(dim3(static_cast<unsigned>((a.n + 7) / 8)), dim3(256), 0, stream);
      check(cudaLaunchKernelEx(&launch.config, small_generic_kernel, part), "small_generic_kernel");
    }
  }
}

}  // namespace specd::cuda
