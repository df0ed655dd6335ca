// Small-M matmul (1 to 16 rows): every weight is read once for all rows, batch-invariant.
//
// bf16 weights use tensor cores: a warp multiplies a tile of 16 weight rows by the (up to 16)
// activation rows with mma.m16n8k16, x split into bf16 hi + lo parts so that the product keeps
// about 16 bits of x's mantissa. Each output element is an independent dot product inside the
// mma, padding rows are zeros, and the split of K over warps and blocks depends only on N and K,
// so a row's bits never depend on how many other rows are in the batch. Partial sums of the
// warps (and of the blocks sharing a tile) are added in a fixed order.
//
// Weights stream through a ring of shared memory per warp, copied asynchronously (no registers
// held) as whole 128-byte lines, kStages - 1 chunks ahead of use, across tile boundaries and
// already before the kernel waits for its predecessor; x of the next chunk is loaded into
// registers while this one multiplies.
#include <algorithm>

#include "backend/cuda/small_mma.cuh"

namespace specd::cuda {
namespace {

using namespace small_mma;  // NOLINT: the kernels' shared constants and helpers

constexpr int kChunkK = 64;  // k per warp step (128 bytes, one cache line, of each weight row)
constexpr int kChunkBytes = kTileN * kChunkK * 2;  // 2 KB: 16 rows x 128 bytes
// Chunks each warp has in flight (its shared-memory ring): 3 for up to 8 rows, 4 for 9 to 16.
// Measured on one H200 (2026-11-27, Llama-3.1-8B shape): 3 decode 1.2% faster than 4 (6: 2.6%
// slower), 4 verify 9 rows 2% faster than 3.
constexpr int stages(bool two_tiles) { return two_tiles ? 4 : 3; }
// The warps' rings: 48 or 64 KB.
constexpr int shared_bytes(bool two_tiles) { return kWarps * stages(two_tiles) * kChunkBytes; }

// 16 bytes global -> shared without registers (zero-filled when `bytes` is 0), cached in L2 only.
__device__ __forceinline__ void copy_async16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most kStages - 2 of this thread's copy groups are still in flight: the oldest
// chunk has arrived.
template <int kStages>
__device__ __forceinline__ void copy_async_wait_oldest() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");
}
__device__ __forceinline__ uint4 load_shared16(uint32_t at) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(at));
  return v;
}
// Byte offset of 16-byte slot `slot` (0..7) of weight row `row` (0..15) in a chunk. Odd rows
// swap their two halves, so the 8 lanes of a read phase (rows 2i and 2i + 1, the same four
// slots) hit distinct banks.
__device__ __forceinline__ uint32_t chunk_offset(int row, int slot) {
  return static_cast<uint32_t>(row * 128 + ((slot ^ ((row & 1) << 2)) << 4));
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

// A warp's sequence of weight chunks: chunk i of each of the block's tiles in turn (chunks
// first, first + splits, ... of the tile's K), copied into the warp's ring of chunks.
// Lane l copies 16 bytes of rows l / 8, 4 + l / 8, 8 + l / 8 and 12 + l / 8 (each row's 128
// bytes by 8 lanes: whole cache lines). kPair: a gate/up pair group.
template <bool kPair>
struct ChunkStream {
  int64_t tile, i, mine;
  const char* row[4];
  bool ok[4];
  int64_t k_first, k_step, k;  // k of chunk i = (k_first + i * k_step) * kChunkK
  __device__ __forceinline__ void seek(const MatmulGroup& group, int64_t tiles) {
    if (tile >= tiles) return;
    const TileSpot spot = find_tile<kPair>(group, tile);
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      // Weight row r * 4 + lane / 8 of the tile; of a gate/up pair, rows 0-7 are gate's and
      // rows 8-15 up's, both from output column spot.n0.
      const MatmulArgs& a = group.part[kPair ? r / 2 : spot.part];
      const int64_t n = spot.n0 + (kPair ? (r % 2) * 4 : r * 4) + lane / 8;
      ok[r] = n < a.n;
      row[r] = static_cast<const char*>(a.w) + (ok[r] ? n : 0) * a.w_stride * 2;
    }
  }
  // Copies the next chunk into `stage` (shared address); commits a group either way, so that
  // the count of groups stays in step with the chunks.
  __device__ __forceinline__ void issue(uint32_t stage, const MatmulGroup& group, int64_t tiles,
                                        int64_t tile_step) {
    if (tile < tiles && mine > 0) {
      const int lane = threadIdx.x % 32;
      const int64_t kk = (k_first + i * k_step) * kChunkK + (lane % 8) * 8;
      const bool in_k = kk < k;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const bool on = ok[r] && in_k;
        copy_async16(stage + chunk_offset(r * 4 + lane / 8, lane % 8), row[r] + (on ? kk * 2 : 0),
                     on ? 16 : 0);
      }
      if (++i == mine) {
        i = 0;
        tile += tile_step;
        seek(group, tiles);
      }
    }
    copy_async_commit();
  }
};

// Blocks loop over the output tiles of every matmul of the group (grid.x blocks per split).
// Each warp streams its chunks through a ring of kStages chunks in shared memory (copies issued
// kStages - 1 chunks ahead, across tile boundaries, and before waiting for the previous kernel),
// multiplies each chunk with mma, and the warps' sums are added in warp order per tile.
// kTwoTiles: rows 9 to 16 as well. kPair: a gate/up pair group.
template <bool kTwoTiles, bool kPair>
__global__ void __launch_bounds__(kWarps * 32, 2)
    small_mma_kernel(MatmulGroup group, int block_splits, float* partials, unsigned* tickets) {
  constexpr int kStages = stages(kTwoTiles);
  extern __shared__ __align__(128) unsigned char rings[];
  __shared__ float reduce[kWarps][kMaxRows][kTileN];
  __shared__ bool last_block;
  const MatmulArgs& a0 = group.part[0];  // x, m, k and the weight dtype are shared
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int64_t split = blockIdx.y;
  const int64_t tiles = group.tile_end[group.count - 1];
  const int64_t splits = static_cast<int64_t>(block_splits) * kWarps;
  const int64_t first = split * kWarps + warp;
  const int64_t n_chunks = (a0.k + kChunkK - 1) / kChunkK;
  const int64_t mine = first < n_chunks ? (n_chunks - first + splits - 1) / splits : 0;
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(rings)) +
                        static_cast<uint32_t>(warp * kStages * kChunkBytes);

  ChunkStream<kPair> stream;
  stream.tile = blockIdx.x;
  stream.i = 0;
  stream.mine = mine;
  stream.k_first = first;
  stream.k_step = splits;
  stream.k = a0.k;
  stream.seek(group, tiles);
  // Weights do not depend on the previous kernel: fill the ring before waiting for it.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    stream.issue(ring + s * kChunkBytes, group, tiles, gridDim.x);
  }
  wait_for_inputs();
  allow_next_kernel();
  const float* x0 = a0.x + static_cast<int64_t>(g) * a0.x_stride;
  const float* x1 = a0.x + static_cast<int64_t>(g + 8) * a0.x_stride;
  const bool has0 = g < a0.m, has1 = g + 8 < a0.m;

  // x of a chunk (both k halves, both row sets) is loaded one chunk ahead of its use.
  struct ChunkX {
    XValues x0[2], x1[2];
  };
  auto load_chunk_x = [&](int64_t i) {
    ChunkX out;
    const int64_t k0 = (first + i * splits) * kChunkK;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t kk = k0 + h * 32 + c * 8;
      const bool in_k = kk < a0.k;
      const int64_t at = in_k ? kk : 0;
      out.x0[h] = load_x(x0 + at, in_k && has0);
      if constexpr (kTwoTiles) out.x1[h] = load_x(x1 + at, in_k && has1);
    }
    return out;
  };
  ChunkX xs = load_chunk_x(0);

  int stage = 0;  // ring slot of the chunk consumed next
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < mine; ++i) {
      copy_async_wait_oldest<kStages>();
      __syncwarp();
      // The slot consumed last step is free again: refill it kStages - 1 chunks ahead.
      stream.issue(ring + ((stage + kStages - 1) % kStages) * kChunkBytes, group, tiles, gridDim.x);
      const ChunkX next_xs = load_chunk_x(i + 1 == mine ? 0 : i + 1);  // the next tile: chunk 0
      const uint32_t chunk = ring + stage * kChunkBytes;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 p = load_shared16(chunk + chunk_offset(g, h * 4 + c));
        const uint4 q = load_shared16(chunk + chunk_offset(g + 8, h * 4 + c));
        mma_piece(acc0, p, q, split_x(xs.x0[h]));
        if constexpr (kTwoTiles) mma_piece(acc1, p, q, split_x(xs.x1[h]));
      }
      xs = next_xs;
      stage = stage + 1 == kStages ? 0 : stage + 1;
    }
    finish_tile<kTwoTiles, kPair>(group, tile, acc0, acc1, reduce, last_block, block_splits,
                                  partials, tickets);
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // no copy may outlive the block
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
  const bool x_ok = a.x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  if (a.w_dtype == DType::kInt8 || a.w_dtype == DType::kInt4) {
    // Whole blocks; the codes of every row 16-byte aligned (rows of a multiple of 4 blocks).
    return x_ok && a.k % 128 == 0 && a.w_stride % 512 == 0 &&
           reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
  }
  return x_ok && a.w_dtype == DType::kBF16 && a.k % 8 == 0 && a.w_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
}

MatmulGroup gate_up_pair_group(Activation act, const MatmulArgs& gate, const MatmulArgs& up) {
  MatmulGroup group;
  const bool fits = small_tensor_cores(gate) && small_tensor_cores(up) &&
                    gate.w_dtype == DType::kBF16 && up.w_dtype == DType::kBF16 && gate.n == up.n &&
                    gate.k == up.k && gate.m == up.m && gate.x == up.x && gate.m <= kMaxRows &&
                    gate.bias == nullptr && up.bias == nullptr && !gate.accumulate &&
                    !up.accumulate && gate.gate == nullptr;
  if (!fits) return group;
  group.part[0] = gate;
  group.part[1] = up;
  group.tile_end[0] = group.tile_end[1] = (gate.n + kTileN / 2 - 1) / (kTileN / 2);
  group.count = 2;
  group.gate_up_pair = true;
  group.pair_act = act;
  return group;
}

SmallMatmulPlan plan_small_matmul(const MatmulGroup& group, int multiprocessors) {
  SmallMatmulPlan plan;
  plan.tensor_cores = true;
  for (int p = 0; p < group.count; ++p) {
    plan.tensor_cores = plan.tensor_cores && small_tensor_cores(group.part[p]) &&
                        group.part[p].w_dtype == group.part[0].w_dtype;
  }
  plan.tiles = group.tile_end[group.count - 1];
  if (!plan.tensor_cores) return plan;
  // One wave of blocks (two per multiprocessor) that loop over the tiles; tiles are split over
  // several blocks when there are fewer tiles than that, keeping at least 2 chunks per warp.
  const int64_t wave = 2 * static_cast<int64_t>(multiprocessors);
  const int64_t step = chunk_k(group.part[0].w_dtype);
  const int64_t n_chunks = (group.part[0].k + step - 1) / step;
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
  if (plan.tensor_cores && group.part[0].w_dtype != DType::kBF16) {
    launch_int(group, plan, scratch, stream);
    return;
  }
  if (plan.tensor_cores) {
    const bool two = group.part[0].m > 8;
    Launch launch(dim3(static_cast<unsigned>(plan.grid_x), plan.block_splits), dim3(kWarps * 32),
                  shared_bytes(two), stream);
    static const bool configured = [] {  // rings past the default 48 KB of shared memory
      for (auto kernel : {small_mma_kernel<true, false>, small_mma_kernel<false, false>,
                          small_mma_kernel<true, true>, small_mma_kernel<false, true>}) {
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   shared_bytes(true)),
              "cudaFuncSetAttribute(small_mma_kernel)");
      }
      return true;
    }();
    (void)configured;
    auto kernel = group.gate_up_pair
                      ? (two ? small_mma_kernel<true, true> : small_mma_kernel<false, true>)
                      : (two ? small_mma_kernel<true, false> : small_mma_kernel<false, false>);
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
