// Pieces shared by the small-M tensor-core matmul kernels (bf16 weights in matmul_small.cu,
// int8 and int4 in matmul_small_int.cu): tiles of 16 weight rows multiplied by up to 16
// activation rows, and the fixed-order reduction of a tile's sums (warps in warp order, then the
// blocks sharing the tile in split order).
#pragma once

#include "backend/cuda/device.cuh"

namespace specd::cuda::small_mma {

constexpr int kWarps = 8;     // warps per block, each on its own K range of the tile
constexpr int kTileN = 16;    // weight rows (output columns) per tile
constexpr int kMaxRows = 16;  // activation rows

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

__device__ __forceinline__ float epilogue(const MatmulArgs& a, int64_t row, int64_t col, float v) {
  if (a.bias != nullptr) v += load_f32(a.bias, a.bias_dtype, col);
  if (a.accumulate) v = a.y[row * a.y_stride + col] + v;
  return v;
}

// Output column of a tile's local column lc (0..15), the weight row the tile reads there. A
// part rotated in its epilogue (QkvOut::half > 0) pairs each head's columns: tile n0 / 16 of a
// head holds columns [8i, 8i + 8) of its first half (lc 0-7) and their partners half further
// (lc 8-15), i = (n0 % head_dim) / 16, so a rotated pair meets in one thread pair (lc, lc + 8).
__device__ __forceinline__ int64_t tile_column(const MatmulArgs& a, int64_t n0, int lc) {
  const int half = a.qkv.half;  // a power of two
  if (half == 0) return n0 + lc;
  const int64_t in_head = n0 & (2 * half - 1);
  return n0 - in_head + in_head / 2 + (lc < kTileN / 2 ? lc : half + lc - kTileN / 2);
}

// Where a tile's weights are: its part of the group and its first output column.
struct TileSpot {
  int part;
  int64_t n0;
};
// kPair: a gate/up pair group (MatmulGroup::gate_up_pair), whose tile t writes part 0's output
// columns from 8t.
template <bool kPair = false>
__device__ __forceinline__ TileSpot find_tile(const MatmulGroup& group, int64_t tile) {
  if constexpr (kPair) return {0, tile * (kTileN / 2)};
  int p = 0;
  while (tile >= group.tile_end[p]) ++p;
  return {p, (tile - (p == 0 ? 0 : group.tile_end[p - 1])) * kTileN};
}

// A folded norm's inverse RMS of x row `row` (NormIn), for the 16 threads of a half-warp that share
// the row (col 0..15): each sums every 16th tile's partial in order, then a fixed shuffle tree.
__device__ __forceinline__ float folded_inv_rms(const NormIn& in, int64_t m, int row, int col) {
  float s = 0.0f;
  if (row < m) {
    for (int64_t j = col; j < in.tiles; j += kTileN) {
      s += __ldcg(in.sums + row * in.sums_stride + j);
    }
  }
#pragma unroll
  for (int o = kTileN / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return rsqrtf(s / in.cols + in.eps);
}

// Pulls a folded norm's sums (NormIn) into L1 once the kernel has waited for the kernel writing
// them, so that the first tile's epilogue finds them there.
__device__ __forceinline__ void prefetch_norm_sums(const NormIn& in, int64_t m) {
  if (in.sums == nullptr) return;
  const int64_t lines = (in.tiles * 4 + 127) / 128;
  if (threadIdx.x < m * lines) {
    const float* p = in.sums + (threadIdx.x / lines) * in.sums_stride + threadIdx.x % lines * 32;
    asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
  }
}

// y's new value `out` at (row, n) of a NormOut part (`weight`: the norm's weight at n): writes
// scaled, and the tile's sum of squares of the row (a shuffle tree over the 16 threads of the
// row; `write` false adds nothing).
__device__ __forceinline__ void fold_norm_out(const NormOut& o, int64_t m, int row, int col,
                                              int64_t n, int64_t n0, bool write, float out,
                                              float weight) {
  float sq = write ? out * out : 0.0f;
  if (write) o.scaled[row * o.scaled_stride + n] = out * weight;
#pragma unroll
  for (int s = kTileN / 2; s > 0; s >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, s);
  if (col == 0 && row < m) o.sums[row * o.sums_stride + n0 / kTileN] = sq;
}

// A q/k/v part's epilogue (QkvOut) for the value `out` (bias added) of x row `row` at column
// n, local column `col` of the tile: rotated with its partner (threads col and col ^ 8; every
// thread of the warp must call), then written to the cache entry of the row or to y.
__device__ __forceinline__ void qkv_out(const MatmulArgs& a, int row, int col, int64_t n,
                                        bool write, float out) {
  const QkvOut& o = a.qkv;
  if (o.half > 0) {
    const float partner = __shfl_xor_sync(0xffffffffu, out, kTileN / 2);
    const int64_t pos = write ? o.positions[row] : -1;
    write = write && pos >= 0 && pos < o.table_rows;  // checked on the host
    if (write) {
      const bool first = col < kTileN / 2;
      const int64_t j = (n & (2 * o.half - 1)) - (first ? 0 : o.half);
      const float c = o.cos[pos * o.table_stride + j], s = o.sin[pos * o.table_stride + j];
      const float2 y = first ? rotate_pair(out, partner, c, s) : rotate_pair(partner, out, c, s);
      out = first ? y.x : y.y;
    }
  }
  if (!write) return;
  if (o.cache == nullptr) {
    a.y[row * a.y_stride + n] = out;
    return;
  }
  const int64_t slot = o.slots[row], index = o.cache_index[row];
  if (slot < 0 || slot >= o.n_slots || index < 0 || index >= o.capacity) return;
  store_f32(o.cache, o.cache_dtype, slot * o.slot_stride + index * a.n + n, out);
}

// The end of a tile: acc0 and acc1 of every warp are added in warp order; when several blocks
// share the tile (block_splits > 1), each publishes its sum and the last to finish adds them in
// split order. Then a folded norm's inverse RMS (NormIn; the block's first tile computes it
// into `inv_rms`, the later ones read it), bias, accumulate and the store into y (kPair: act(gate)
// * up instead), and a folded norm's scaled rows and sums (NormOut). Called by the whole block;
// `reduce` and `last_block` are the block's shared scratch. Accumulator layouts (AccLayout).
// kRows: x rows `reduce` holds (8 where no lane's sums reach rows 8-15: they are zeros).
// kAlternate: consecutive tiles of the block pass alternate `reduce` arrays, so the barrier
// that keeps the next tile from overwriting `reduce` while it is read is left out (the next
// tile's own barrier orders `last_block` and `inv_rms`).
enum class AccLayout {
  // weights as the mma's A operand: acc0 holds x rows 0-7 and acc1 x rows 8-15, element e at
  // weight row g (+8 for e >= 2) and x row 2c + (e & 1)
  kWeightsInA,
  // x as the A operand: acc0 holds weight rows 0-7 and acc1 weight rows 8-15, element e at x
  // row g (+8 for e >= 2) and weight row 2c + (e & 1)
  kXInA,
  // one x row per lane (up to 4 rows): acc0[0] at weight row g and acc0[1] at g + 8, x row c
  kXRowPerLane,
  // 9 to 12 rows: acc0 as kWeightsInA (x rows 0-7), and acc1 one x row per lane (rows 8-11):
  // acc1[0] at weight row g and acc1[1] at g + 8, x row 8 + c
  kSecondTileRowPerLane,
};
template <bool kTwoTiles, bool kPair = false, AccLayout kLayout = AccLayout::kWeightsInA,
          bool kAlternate = false, int kRows>
__device__ __forceinline__ void finish_tile(const MatmulGroup& group, int64_t tile,
                                            const float (&acc0)[4], const float (&acc1)[4],
                                            float (&reduce)[kWarps][kRows][kTileN],
                                            bool& last_block, int block_splits, float* partials,
                                            unsigned* tickets, float (&inv_rms)[kMaxRows]) {
  static_assert(kRows == kMaxRows || (kRows == 8 && kLayout == AccLayout::kXInA));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int64_t split = blockIdx.y;
  const int t = threadIdx.x;  // one (x row, column) per thread, 16 x 16
  const int xr = t / kTileN, col = t % kTileN;
  const TileSpot spot = find_tile<kPair>(group, tile);
  const MatmulArgs& a = group.part[spot.part];
  const int64_t n = kPair ? spot.n0 + col : tile_column(a, spot.n0, col);
  // A folded norm's weight at n, loaded before the reduction so that its latency overlaps it.
  const bool norm_out = !kPair && a.norm_out.sums != nullptr;
  const float norm_weight =
      norm_out && n < a.n ? load_f32(a.norm_out.weight, a.norm_out.weight_dtype, n) : 0.0f;

#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if constexpr (kLayout == AccLayout::kXRowPerLane) {
      // x row c + 4e: the lane's row (e = 0) or rows no lane holds (zeros).
      reduce[warp][c + 4 * e][g] = e == 0 ? acc0[0] : 0.0f;
      reduce[warp][c + 4 * e][g + 8] = e == 0 ? acc0[1] : 0.0f;
    } else if constexpr (kLayout == AccLayout::kSecondTileRowPerLane) {
      const int wr = g + (e >= 2 ? 8 : 0), x_row = 2 * c + (e & 1);
      reduce[warp][x_row][wr] = acc0[e];
      // x row 8 + c (e < 2) or 12 + c (zeros: no lane holds rows 12-15) at weight row g, g + 8.
      reduce[warp][8 + c + 4 * (e / 2)][g + 8 * (e & 1)] = e < 2 ? acc1[e] : 0.0f;
    } else if constexpr (kLayout == AccLayout::kXInA) {
      const int x_row = g + (e >= 2 ? 8 : 0), wr = 2 * c + (e & 1);
      if (kRows == kMaxRows || e < 2) {
        reduce[warp][x_row][wr] = acc0[e];
        reduce[warp][x_row][wr + 8] = acc1[e];
      }
    } else {
      // acc element e sits at weight row g (+8 for e >= 2) and x row 2c + (e & 1) (+8 for acc1).
      const int wr = g + (e >= 2 ? 8 : 0), x_row = 2 * c + (e & 1);
      reduce[warp][x_row][wr] = acc0[e];
      reduce[warp][x_row + 8][wr] = kTwoTiles ? acc1[e] : 0.0f;
    }
  }
  __syncthreads();
  float v = 0.0f;
  if (xr < kRows) {
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v += reduce[i][xr][col];
  }
  // A gate/up pair: the thread of gate column col takes the up value of column col + 8 (in its
  // warp) and writes act(gate) * up to column n0 + col.
  const bool write = kPair ? xr < a.m && col < kTileN / 2 && n < a.n : xr < a.m && n < a.n;
  const NormIn& norm_in = group.part[0].norm_in;  // every part reads the same x
  float row_inv_rms = 1.0f;
  if (norm_in.sums != nullptr && tile < gridDim.x) {  // the block's first tile
    row_inv_rms = folded_inv_rms(norm_in, a.m, xr, col);
    if (col == 0) inv_rms[xr] = row_inv_rms;
  } else if (norm_in.sums != nullptr) {
    row_inv_rms = inv_rms[xr];
  }
  auto store = [&](float value) {
    if (norm_in.sums != nullptr) value *= row_inv_rms;
    if constexpr (kPair) {
      const float up = __shfl_down_sync(0xffffffffu, value, kTileN / 2);
      if (write) a.y[xr * a.y_stride + n] = gated(group.pair_act, value, up);
    } else {
      const float out = write ? epilogue(a, xr, n, value) : 0.0f;
      if (a.qkv.half > 0 || a.qkv.cache != nullptr) {
        qkv_out(a, xr, col, n, write, out);
      } else if (write) {
        a.y[xr * a.y_stride + n] = out;
      }
      if (norm_out) fold_norm_out(a.norm_out, a.m, xr, col, n, spot.n0, write, out, norm_weight);
    }
  };
  if (block_splits == 1) {
    store(v);
  } else {
    // Several blocks share this tile: publish the partial; the last block to finish adds the
    // partials in split order (the same order whichever block arrives last).
    float* tile_partials = partials + tile * block_splits * (kMaxRows * kTileN);
    tile_partials[split * (kMaxRows * kTileN) + t] = v;
    __threadfence();
    __syncthreads();
    if (t == 0) {
      last_block = atomicAdd(&tickets[tile], 1u) == static_cast<unsigned>(block_splits - 1);
    }
    __syncthreads();
    if (last_block) {
      __threadfence();
      float sum = 0.0f;
      for (int s = 0; s < block_splits; ++s) {
        sum += __ldcg(&tile_partials[s * (kMaxRows * kTileN) + t]);
      }
      store(sum);
      if (t == 0) tickets[tile] = 0;
    }
  }
  if constexpr (!kAlternate) __syncthreads();  // `reduce` and `last_block` are reused next tile
}

// Chunk size in k of the tensor-core kernels, by weight dtype (bf16: 64, int8/int4: one block).
constexpr int64_t chunk_k(DType dtype) { return dtype == DType::kBF16 ? 64 : 128; }

// The int8/int4 tensor-core kernels' launcher (matmul_small_int.cu); plan as for bf16.
void launch_int(const MatmulGroup& group, const SmallMatmulPlan& plan, const MatmulScratch& scratch,
                cudaStream_t stream);

}  // namespace specd::cuda::small_mma
