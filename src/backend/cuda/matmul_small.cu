// Small-M matmul (1 to 16 rows): every weight is read once for all rows, batch-invariant.
//
// bf16 weights use tensor cores: a warp multiplies the (up to 16) activation rows by a tile of
// 16 weight rows with mma.m16n8k16, x rounded to bf16 as the A operand (as the prefill GEMM and
// the CPU backend round it, and as bf16 inference does), and each half of the tile (8 weight
// rows) as a B operand taken from shared memory as it was copied. Each output element is an
// independent dot product inside the mma, padding rows are zeros, and the split of K over warps and
// blocks depends only on N and K, so a row's bits never depend on how many other rows are in the
// batch. A warp's chunks of K are one contiguous range (against the chunks interleaved over the
// warps, one H200: 8B-shaped bf16 decode 247.4 against 242.7 tok/s, the 1B shape 0.3% slower).
// Partial sums of the warps (and of the blocks sharing a tile) are added in a fixed order.
//
// Weights stream through a ring of shared memory per warp, copied asynchronously (no registers
// held, evicted first from L2) as whole 128-byte lines, kStages - 1 chunks ahead of use, across
// tile boundaries and already before the kernel waits for its predecessor. Up to 9 rows, x's
// rows of each chunk travel in the same ring slot (copied after the wait); with 10 to 16 rows x
// of the next chunk is loaded into registers while this one multiplies. The step loop advances
// pointers by fixed strides: it does no index arithmetic per chunk.
#include <algorithm>

#include "backend/cuda/small_mma.cuh"

namespace specd::cuda {
namespace {

using namespace small_mma;  // NOLINT: the kernels' shared constants and helpers

constexpr int kChunkK = 64;  // k per warp step (128 bytes, one cache line, of each weight row)
constexpr int kChunkBytes = kTileN * kChunkK * 2;  // 2 KB: 16 rows x 128 bytes
// Up to kRingRows rows, a ring slot also holds x's rows of the chunk (f32, 256 bytes a row),
// copied with the weights; with more x is loaded into registers (the ring would not leave room
// for two blocks per multiprocessor).
constexpr int kRingRows = 9;  // two blocks' rings and tile sums still fit a multiprocessor
// Chunks each warp has in flight (its shared-memory ring): 4, or 3 with x in the ring past
// kDeepRingRows rows, where two blocks' rings of 4 would not fit a multiprocessor. Measured on
// one H200 (2026-11-29, Llama-3.1-8B shape, one barrier a tile): 4 stages decode 90.8% of the
// roofline against 88.7% with 3 (5: no faster than 4); before each warp's chunks were one
// contiguous K range, 3 had been 1.2% faster. x in registers: 4 verify 9 rows 2% faster than 3.
constexpr int kDeepRingRows = 5;
constexpr int stages(bool two_tiles, int64_t m) { return two_tiles || m <= kDeepRingRows ? 4 : 3; }
constexpr int kXRowBytes = kChunkK * 4;
constexpr int slot_bytes(bool two_tiles, int64_t m) {
  return kChunkBytes + (two_tiles ? 0 : static_cast<int>(m) * kXRowBytes);
}
// The warps' rings: 72 to 104 KB (x in the ring), 64 KB (x in registers).
constexpr int shared_bytes(bool two_tiles, int64_t m) {
  return kWarps * stages(two_tiles, m) * slot_bytes(two_tiles, m);
}
constexpr int most_shared_bytes() {
  int most = 0;
  for (int m = 1; m <= kMaxRows; ++m) {
    most = std::max(most, shared_bytes(m > kRingRows, m));
  }
  return most;
}

// 16 bytes global -> shared without registers (zero-filled when `bytes` is 0), cached in L2 only
// and there under `policy`.
__device__ __forceinline__ void copy_async16(uint32_t dst, const void* src, int bytes,
                                             uint64_t policy) {
  asm volatile(
      "cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;" ::"r"(dst),
      "l"(src), "r"(bytes), "l"(policy)
      : "memory");
}
// The same for x (L2's default policy: x is read again by every block).
__device__ __forceinline__ void copy_async16_x(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes)
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
__device__ __forceinline__ float4 load_shared_f4(uint32_t at) {
  const uint4 v = load_shared16(at);
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z),
                     __uint_as_float(v.w));
}
// Byte offset of 16-byte slot `slot` (0..7) of weight row `row` (0..15) in a chunk. Odd rows
// swap their two halves, so the 8 lanes of a read phase (rows 2i and 2i + 1, the same four
// slots) hit distinct banks.
__device__ __forceinline__ uint32_t chunk_offset(int row, int slot) {
  return static_cast<uint32_t>(row * 128 + ((slot ^ ((row & 1) << 2)) << 4));
}
// Byte offset of 16-byte unit `unit` (0..15: k 4 * unit ... + 3) of x row `row` in a slot's x
// part. Odd rows swap neighbouring units, so that lanes reading rows 2i and 2i + 1 at the same
// k (units 2c + f) hit distinct banks.
__device__ __forceinline__ uint32_t x_offset(int row, int unit) {
  return static_cast<uint32_t>(kChunkBytes + row * kXRowBytes + ((unit ^ (row & 1)) << 4));
}

// The k order inside the mma. Lane (g, c) = (lane / 4, lane % 4) holds, for each half h of a
// chunk, 8 consecutive k (h * 32 + 8c ... + 7) of weight rows g and g + 8 (16 bytes each, read
// from shared memory) and of x rows g and g + 8. Its mma k slots 2c, 2c + 1 and 2c + 8, 2c + 9
// stand for k 8c + 4s ... 8c + 4s + 3 in k16 step s (0, 1) of the half. A and B use the same
// slots, so every product meets its partner; the mma adds its slots in its own fixed way, the
// same whatever the row count.
//
// Eight x values of one row rounded to bf16 pairs (pair j: k 2j, 2j + 1 of the eight).
struct XPairs {
  uint32_t w[4];
};
__device__ __forceinline__ XPairs round_x(const float4& a, const float4& b) {
  return {{pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y), pack_bf16(b.z, b.w)}};
}

// A warp's sums over its chunks of a tile. A's rows are x's rows (zeros past M), the two halves
// of the tile (weight rows 0-7 and 8-15: p and q) are its B operands: acc_p[e] is the sum of x
// row g (e < 2) or g + 8 and weight row 2c + e % 2. Every output sees the same mma sequence
// whatever the row count, so a row's bits do not depend on it.
struct WarpSums {
  float acc_p[4] = {0, 0, 0, 0}, acc_q[4] = {0, 0, 0, 0};

  // Adds one half chunk (32 k): x0 and x1 are x rows g and g + 8, p and q the lane's 16 bytes
  // of weight rows g and g + 8.
  __device__ __forceinline__ void add(const XPairs& x0, const XPairs& x1, const uint4& p,
                                      const uint4& q) {
    const uint32_t pw[4] = {p.x, p.y, p.z, p.w}, qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; j += 2) {
      mma_bf16(acc_p, x0.w[j], x1.w[j], x0.w[j + 1], x1.w[j + 1], pw[j], pw[j + 1]);
      mma_bf16(acc_q, x0.w[j], x1.w[j], x0.w[j + 1], x1.w[j + 1], qw[j], qw[j + 1]);
    }
  }
};

// What stays fixed while a warp streams its chunks: the tiles it visits (tile, tile + step, ...
// below tiles) and, in each, its chunks first, first + 1, ... (`mine` of them).
struct WarpWalk {
  int64_t tiles, tile_step;
  int mine;
  int k;        // the matmul's K
  int k_first;  // k of the lane's first 16 bytes of a tile: first * kChunkK + (lane % 8) * 8
};

// A warp's copies: chunk i of each of its tiles in turn, into its ring. Lane l copies 16 bytes
// of weight rows l / 8, 4 + l / 8, 8 + l / 8 and 12 + l / 8 (each row's 128 bytes by 8 lanes:
// whole cache lines). kX (up to kRingRows rows): also x's rows of the chunk, lane l 16 bytes (unit
// l % 16) of rows l / 16, 2 + l / 16, ... below M, zero-filled past K; a warp's chunks have the
// same k in every tile, so x's walk restarts at each tile. kPair: a gate/up pair group.
template <bool kPair, bool kX>
struct ChunkStream {
  const char* src[4];    // the lane's next 16 bytes of its four weight rows
  bool row_ok[4];        // false past the matrix's last row (zero-filled)
  int64_t tile;          // the tile being copied; done at walk.tiles
  int i;                 // its chunks copied so far
  int kk;                // k of the lane's next 16 bytes of weights
  uint64_t policy;       // weights_l2_policy()
  const float* x_first;  // kX: the lane's 16 bytes of x row lane / 16 in a tile's first chunk
  const float* x_src;    // ... and in the next chunk
  int64_t x_row2;        // two rows of x (elements)
  int x_k_first;         // k of x_first
  int x_rows;            // x rows the lane copies: (M - lane / 16) / 2, rounded up

  __device__ __forceinline__ void seek(const MatmulGroup& group, const WarpWalk& walk) {
    kk = walk.k_first;
    if constexpr (kX) x_src = x_first;
    if (tile >= walk.tiles) return;
    const TileSpot spot = find_tile<kPair>(group, tile);
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      // Weight row r * 4 + lane / 8 of the tile; of a gate/up pair, rows 0-7 are gate's and
      // rows 8-15 up's, both from output column spot.n0.
      const MatmulArgs& a = group.part[kPair ? r / 2 : spot.part];
      const int64_t n =
          kPair ? spot.n0 + (r % 2) * 4 + lane / 8 : tile_column(a, spot.n0, r * 4 + lane / 8);
      row_ok[r] = n < a.n;
      src[r] = static_cast<const char*>(a.w) + ((row_ok[r] ? n : 0) * a.w_stride + kk) * 2;
    }
  }
  // x of chunk i of a tile to `dst` (the slot's address plus the lane's x offset).
  __device__ __forceinline__ void copy_x(uint32_t dst, const float* from, int k_of,
                                         const WarpWalk& walk) const {
    const int bytes = k_of < walk.k ? 16 : 0;
#pragma unroll
    for (int j = 0; j < (kRingRows + 1) / 2; ++j) {
      if (j < x_rows) copy_async16_x(dst + j * 2 * kXRowBytes, from + j * x_row2, bytes);
    }
  }
  // x of the first `count` chunks, whose weights were copied before the kernel waited for its
  // inputs: one copy group each, into slots 0, 1, ... (slot bytes apart).
  __device__ __forceinline__ void copy_first_x(uint32_t dst, uint32_t slot, int count,
                                               const WarpWalk& walk) const {
    int64_t t = walk.mine > 0 ? static_cast<int64_t>(blockIdx.x) : walk.tiles;
    int at = 0;
    for (int s = 0; s < count; ++s) {
      if (t < walk.tiles) {
        copy_x(dst + s * slot, x_first + at * kChunkK, x_k_first + at * kChunkK, walk);
      }
      copy_async_commit();
      if (++at == walk.mine) {
        at = 0;
        t += walk.tile_step;
      }
    }
  }
  // Copies the next chunk: weights to `dst` and (kX) x to `x_dst`, the ring slot's address plus
  // the lane's offsets.
  __device__ __forceinline__ void issue(uint32_t dst, uint32_t x_dst, const MatmulGroup& group,
                                        const WarpWalk& walk, bool with_x) {
    if (tile >= walk.tiles) return;
    const bool in_k = kk < walk.k;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      copy_async16(dst + r * 4 * 128, src[r], row_ok[r] && in_k ? 16 : 0, policy);
      src[r] += static_cast<int64_t>(kChunkK) * 2;
    }
    if constexpr (kX) {
      if (with_x) copy_x(x_dst, x_src, kk - walk.k_first + x_k_first, walk);
      x_src += kChunkK;
    }
    kk += kChunkK;
    if (++i == walk.mine) {
      i = 0;
      tile += walk.tile_step;
      seek(group, walk);
    }
  }
};

// Blocks loop over the output tiles of every matmul of the group (grid.x blocks per split).
// Each warp streams its chunks through a ring of kStages chunks in shared memory (copies issued
// kStages - 1 chunks ahead, across tile boundaries, and before waiting for the previous kernel),
// multiplies each chunk with mma, and the warps' sums are added in warp order per tile.
// kTwoTiles: up to 16 rows, x in registers; else x in the ring, rows 8 to kRingRows - 1 too
// when kRingHigh. kPair: a gate/up pair group. kStages: the ring's chunks (stages()).
template <bool kTwoTiles, bool kPair, bool kRingHigh, int kStages>
__global__ void __launch_bounds__(kWarps * 32, 2)
    small_mma_kernel(MatmulGroup group, int block_splits, float* partials, unsigned* tickets) {
  constexpr bool kXInRing = !kTwoTiles;
  // Up to 8 rows the tile sums need 8 rows of `reduce`, and two of them (tiles alternate) fit
  // where one of 16 did: one barrier a tile instead of two (finish_tile).
  constexpr bool kAlternate = kXInRing && !kRingHigh;
  constexpr int kReduceRows = kAlternate ? 8 : kMaxRows;
  extern __shared__ __align__(128) unsigned char rings[];
  __shared__ float reduce[kAlternate ? 2 : 1][kWarps][kReduceRows][kTileN];
  __shared__ bool last_block;
  __shared__ float inv_rms[kMaxRows];    // a folded norm's (finish_tile)
  const MatmulArgs& a0 = group.part[0];  // x, m, k and the weight dtype are shared
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int splits = block_splits * kWarps;
  const int split = static_cast<int>(blockIdx.y) * kWarps + warp;
  const int n_chunks = static_cast<int>((a0.k + kChunkK - 1) / kChunkK);
  // The warp's chunks: [first, first + mine), the same for every row count.
  const int first = n_chunks * split / splits;
  WarpWalk walk;
  walk.tiles = group.tile_end[group.count - 1];
  walk.tile_step = gridDim.x;
  walk.mine = n_chunks * (split + 1) / splits - first;
  walk.k = static_cast<int>(a0.k);
  walk.k_first = first * kChunkK + (lane % 8) * 8;
  const uint32_t slot = kTwoTiles ? kChunkBytes : slot_bytes(false, a0.m);
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(rings)) +
                        static_cast<uint32_t>(warp * kStages) * slot;
  const uint32_t ring_end = ring + kStages * slot;
  auto next_slot = [&](uint32_t at) { return at + slot == ring_end ? ring : at + slot; };

  ChunkStream<kPair, kXInRing> stream;
  stream.tile = walk.mine > 0 ? static_cast<int64_t>(blockIdx.x) : walk.tiles;
  stream.i = 0;
  stream.policy = weights_l2_policy();
  stream.x_k_first = first * kChunkK + (lane % 16) * 4;
  stream.x_first = a0.x + (lane / 16) * a0.x_stride + stream.x_k_first;
  stream.x_row2 = 2 * a0.x_stride;
  stream.x_rows = (static_cast<int>(a0.m) - lane / 16 + 1) / 2;
  stream.seek(group, walk);
  const uint32_t copy_at = chunk_offset(lane / 8, lane % 8);  // the lane's bytes in a chunk
  const uint32_t x_copy_at = x_offset(lane / 16, lane % 16);
  // Weights do not depend on the previous kernel: fill the ring before waiting for it. x does,
  // so its copies of those chunks follow the wait, each chunk's in a copy group of its own.
  if constexpr (kXInRing) {
    // Not unrolled: unrolled, ptxas 13.0 gave the pair kernel's copies an odd uniform register
    // as cache-policy descriptor, an illegal instruction on sm_90a.
    uint32_t ahead_at = ring + copy_at;
#pragma unroll 1
    for (int s = 0; s < kStages - 1; ++s, ahead_at += slot) {
      stream.issue(ahead_at, 0, group, walk, false);
      copy_async_commit();
    }
    wait_for_inputs();
    allow_next_kernel();
    prefetch_norm_sums(a0.norm_in, a0.m);
    stream.copy_first_x(ring + x_copy_at, slot, kStages - 1, walk);
  } else {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      stream.issue(ring + s * kChunkBytes + copy_at, 0, group, walk, false);
      copy_async_commit();
    }
    wait_for_inputs();
    allow_next_kernel();
    prefetch_norm_sums(a0.norm_in, a0.m);
  }

  // With 10 to 16 rows: x rows g and g + 8 at the lane's k of a chunk's first half (the second
  // is 32 further), loaded into registers a chunk ahead.
  const float* x_first = a0.x + static_cast<int64_t>(g) * a0.x_stride + first * kChunkK + c * 8;
  const int64_t x_row8 = 8 * a0.x_stride;
  const int kx_first = first * kChunkK + c * 8;
  const bool has0 = g < a0.m, has1 = g + 8 < a0.m;
  struct ChunkX {
    float4 x0[2][2], x1[2][2];  // [half][first / last four]
  };
  auto load_chunk_x = [&](const float* at, int kx) {
    ChunkX out;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool in_k = kx + h * 32 < walk.k;
      const float4 zero = make_float4(0, 0, 0, 0);
      const float4* p0 = reinterpret_cast<const float4*>(at + h * 32);
      const bool on0 = in_k && has0;
      out.x0[h][0] = on0 ? p0[0] : zero;
      out.x0[h][1] = on0 ? p0[1] : zero;
      const float4* p1 = reinterpret_cast<const float4*>(at + x_row8 + h * 32);
      const bool on1 = in_k && has1;
      out.x1[h][0] = on1 ? p1[0] : zero;
      out.x1[h][1] = on1 ? p1[1] : zero;
    }
    return out;
  };
  const float* x_at = x_first;
  int kx = kx_first;
  ChunkX xs = !kXInRing && walk.mine > 0 ? load_chunk_x(x_at, kx) : ChunkX{};
  // x in the ring: x row `row` of half h of a chunk is units 8h + 2c and 8h + 2c + 1 of the
  // slot's x (lanes of rows past M read row 0, inside the slot, and use zeros). Rows g and, with
  // kRingHigh, g + 8.
  struct RingX {
    uint32_t at[2][2];
    bool has;
  };
  auto ring_x = [&](int row, bool has) {
    const int r = has ? row : 0;
    return RingX{{{x_offset(r, 2 * c), x_offset(r, 2 * c + 1)},
                  {x_offset(r, 8 + 2 * c), x_offset(r, 9 + 2 * c)}},
                 has};
  };
  const RingX x_low = ring_x(g, has0), x_high = ring_x(g + 8, has1);
  auto read_ring_x = [&](uint32_t slot_at, const RingX& x, int h) {
    float4 v[2] = {load_shared_f4(slot_at + x.at[h][0]), load_shared_f4(slot_at + x.at[h][1])};
    if (!x.has) v[0] = v[1] = make_float4(0, 0, 0, 0);
    return round_x(v[0], v[1]);
  };
  // Where the lane reads weight rows g (p) and g + 8 (q, 1 KB further) of half h of a chunk.
  const uint32_t read_at[2] = {chunk_offset(g, c), chunk_offset(g, 4 + c)};

  uint32_t read_slot = ring, fill_slot = ring + (kStages - 1) * slot;
  int parity = 0;  // kAlternate: the tile's `reduce`
  for (int64_t tile = blockIdx.x; tile < walk.tiles; tile += gridDim.x) {
    WarpSums sums;
    // Unrolled by 2 with x in the ring; with x in registers they would spill.
#pragma unroll(kTwoTiles ? 1 : 2)
    for (int i = 0; i < walk.mine; ++i) {
      copy_async_wait_oldest<kStages>();
      __syncwarp();
      // The slot consumed last step is free again: refill it kStages - 1 chunks ahead.
      stream.issue(fill_slot + copy_at, fill_slot + x_copy_at, group, walk, true);
      copy_async_commit();
      fill_slot = next_slot(fill_slot);
      ChunkX next_xs;
      if constexpr (!kXInRing) {
        const bool tile_done = i + 1 == walk.mine;  // the next x is the next tile's chunk 0
        x_at = tile_done ? x_first : x_at + kChunkK;
        kx = tile_done ? kx_first : kx + kChunkK;
        next_xs = load_chunk_x(x_at, kx);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 p = load_shared16(read_slot + read_at[h]);
        const uint4 q = load_shared16(read_slot + read_at[h] + 8 * 128);
        if constexpr (kXInRing) {
          // Rows at or past M were not copied: read row 0 (no branch), then zeroed.
          const XPairs high = kRingHigh ? read_ring_x(read_slot, x_high, h) : XPairs{};
          sums.add(read_ring_x(read_slot, x_low, h), high, p, q);
        } else {
          sums.add(round_x(xs.x0[h][0], xs.x0[h][1]), round_x(xs.x1[h][0], xs.x1[h][1]), p, q);
        }
      }
      if constexpr (!kXInRing) xs = next_xs;
      read_slot = next_slot(read_slot);
    }
    finish_tile<kTwoTiles, kPair, AccLayout::kXInA, kAlternate>(
        group, tile, sums.acc_p, sums.acc_q, reduce[parity], last_block, block_splits, partials,
        tickets, inv_rms);
    if constexpr (kAlternate) parity ^= 1;
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
    // Whole blocks, rows of a multiple of 512 elements: with fewer, the CUDA-core kernel's
    // one-row steps were faster (docs/cuda_backend.md, weight quantisation).
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
    const int64_t m = group.part[0].m;
    const bool two = m > kRingRows;
    Launch launch(dim3(static_cast<unsigned>(plan.grid_x), plan.block_splits), dim3(kWarps * 32),
                  shared_bytes(two, m), stream);
    // By row count: x in the ring with a deep ring (up to kDeepRingRows rows), with a ring of 3
    // (to 8 rows), with rows 8 and up (9), x in registers (10 to 16).
    constexpr int kDeep = stages(false, 1), kShallow = stages(false, kRingRows);
    constexpr int kRegisters = stages(true, kMaxRows);
    static_assert(stages(false, 8) == kShallow && stages(false, kDeepRingRows) == kDeep);
    auto kernel_for = [](auto pair, int64_t rows) {
      constexpr bool kPair = decltype(pair)::value;
      return rows > kRingRows       ? small_mma_kernel<true, kPair, false, kRegisters>
             : rows > 8             ? small_mma_kernel<false, kPair, true, kShallow>
             : rows > kDeepRingRows ? small_mma_kernel<false, kPair, false, kShallow>
                                    : small_mma_kernel<false, kPair, false, kDeep>;
    };
    static const bool configured = [&] {  // rings past the default 48 KB of shared memory
      for (int64_t rows = 1; rows <= kMaxRows; ++rows) {
        for (auto k : {kernel_for(std::false_type{}, rows), kernel_for(std::true_type{}, rows)}) {
          check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     most_shared_bytes()),
                "cudaFuncSetAttribute(small_mma_kernel)");
        }
      }
      return true;
    }();
    (void)configured;
    auto kernel =
        group.gate_up_pair ? kernel_for(std::true_type{}, m) : kernel_for(std::false_type{}, m);
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
