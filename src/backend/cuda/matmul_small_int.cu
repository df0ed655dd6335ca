// Small-M matmul (1 to 16 rows) of specd's load-time int8 and int4 weights (128-element blocks:
// int8 f32 d + int8 q[128], y = d q; int4 f16 d, f16 m + 64 bytes of nibbles, y = d q + m) on
// tensor cores, batch-invariant.
//
// A warp owns a tile of 16 weight rows and a K range of whole blocks, as the bf16 kernel does
// (same plan, same fixed-order reduction). Per block, lane (g, c) loads the header and the code
// words at bytes 16j + 4c of weight rows g and g + 8 (int8: j < 8, int4: j < 4, whose low
// nibbles are k = 16j + 4c .. + 3 and high nibbles the same k + 64). Each word feeds one mma step
// of 16 k (the lane's four codes, matched by a 16-byte load of x). Codes become bf16 exactly,
// the block's 8 steps sum q · x (x as bf16 hi + lo), and acc += d · sum (int4: + m · sum of x,
// the sum from the same steps with all-ones weights) adds the block in K order. The next block's
// words are loaded while this one multiplies (the first before waiting for the previous kernel).
#include "backend/cuda/small_mma.cuh"

namespace specd::cuda::small_mma {
namespace {

constexpr int kBlockK = 128;

template <DType kType>
struct Format {
  static constexpr bool kInt8 = kType == DType::kInt8;
  static constexpr int kBlockBytes = kInt8 ? 132 : 68;  // header + codes
  static constexpr int kWords = kInt8 ? 8 : 4;          // code words per lane and row
};

// A 4-byte aligned word of weights through L1 (the lanes of a row read 16 adjacent bytes per
// load; the row's other sectors follow in the next loads).
__device__ __forceinline__ uint32_t load_word_l1(const uint8_t* p) {
  uint32_t v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// int8 codes e and e + 1 of `word` as a bf16 pair (lower k in the low half): q + 128 placed in
// an f32 mantissa, the offset subtracted exactly, the upper halves taken (an integer of at most
// 8 significant bits has zero low 16 bits).
__device__ __forceinline__ uint32_t int8_pair(uint32_t word, int e) {
  const uint32_t biased = word ^ 0x80808080u;
  const float lo = byte_value(biased, e, 8388736.0f), hi = byte_value(biased, e + 1, 8388736.0f);
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

// int4 codes of bytes e and e + 1 of `word` (low or high nibbles) as a bf16 pair: 128 + q is
// bf16 0x4300 | q, and 128 is subtracted exactly in bf16.
__device__ __forceinline__ uint32_t int4_pair(uint32_t word, int e, bool high) {
  const uint32_t nibbles = (high ? word >> 4 : word) & 0x0F0F0F0Fu;
  const uint32_t pair = __byte_perm(nibbles, 0x43u, 0x4040u | e | ((e + 1) << 8));
  const __nv_bfloat162 v = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&pair),
                                   __floats2bfloat162_rn(128.0f, 128.0f));
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One block of weight rows g and g + 8 for this lane: headers and code words.
template <DType kType>
struct Block {
  uint32_t head[2];
  uint32_t q[2][Format<kType>::kWords];
};

template <DType kType, bool kTwoTiles>
__global__ void __launch_bounds__(kWarps * 32, 2)
    small_int_mma_kernel(MatmulGroup group, int block_splits, float* partials, unsigned* tickets) {
  using F = Format<kType>;
  __shared__ float reduce[kWarps][kMaxRows][kTileN];
  __shared__ bool last_block;
  const MatmulArgs& a0 = group.part[0];  // x, m, k and the weight dtype are shared
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int64_t tiles = group.tile_end[group.count - 1];
  const int64_t splits = static_cast<int64_t>(block_splits) * kWarps;
  const int64_t first = blockIdx.y * static_cast<int64_t>(kWarps) + warp;
  const int64_t n_blocks = a0.k / kBlockK;
  const int64_t mine = first < n_blocks ? (n_blocks - first + splits - 1) / splits : 0;

  // Rows g and g + 8 of a tile (row 0 of the part, never used, past its end).
  struct Rows {
    const uint8_t* row[2];
    bool ok[2];
  };
  auto rows_of = [&](int64_t tile) {
    Rows out{};
    if (tile >= tiles) return out;
    const TileSpot spot = find_tile(group, tile);
    const MatmulArgs& a = group.part[spot.part];
    const int64_t row_bytes = a.w_stride / kBlockK * F::kBlockBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = spot.n0 + g + 8 * h;
      out.ok[h] = n < a.n;
      out.row[h] = static_cast<const uint8_t*>(a.w) + (out.ok[h] ? n : 0) * row_bytes;
    }
    return out;
  };
  // Block i of this warp's K range (all zero past the part's rows: a zero scale and offset).
  auto load_block = [&](const Rows& rows, int64_t i) {
    Block<kType> b;
    const int64_t at = (first + i * splits) * F::kBlockBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint8_t* p = rows.row[h] + at;
      b.head[h] = rows.ok[h] ? load_word_l1(p) : 0u;
#pragma unroll
      for (int j = 0; j < F::kWords; ++j) {
        b.q[h][j] = rows.ok[h] ? load_word_l1(p + 4 + 16 * j + 4 * c) : 0u;
      }
    }
    return b;
  };

  Rows rows = rows_of(blockIdx.x);
  Block<kType> w = mine > 0 ? load_block(rows, 0) : Block<kType>{};
  wait_for_inputs();
  allow_next_kernel();
  const float* x0 = a0.x + static_cast<int64_t>(g) * a0.x_stride;
  const float* x1 = a0.x + static_cast<int64_t>(g + 8) * a0.x_stride;
  const bool has0 = g < a0.m, has1 = g + 8 < a0.m;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 pair (1, 1)

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const Rows next_rows = rows_of(tile + gridDim.x);
    float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < mine; ++i) {
      // The next block: this tile's, or the next tile's first.
      const Block<kType> next = i + 1 < mine ? load_block(rows, i + 1) : load_block(next_rows, 0);
      const int64_t k0 = (first + i * splits) * kBlockK;
      float sum0[4] = {0, 0, 0, 0}, sum1[4] = {0, 0, 0, 0};  // q · x
      float xs0[4] = {0, 0, 0, 0}, xs1[4] = {0, 0, 0, 0};    // int4: sums of x
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int64_t kk = k0 + 16 * j + 4 * c;
        uint32_t p0, p2, q0, q2;  // rows g and g + 8, codes {0, 1} and {2, 3}
        if constexpr (F::kInt8) {
          p0 = int8_pair(w.q[0][j], 0), p2 = int8_pair(w.q[0][j], 2);
          q0 = int8_pair(w.q[1][j], 0), q2 = int8_pair(w.q[1][j], 2);
        } else {
          const bool high = j >= 4;
          p0 = int4_pair(w.q[0][j % 4], 0, high), p2 = int4_pair(w.q[0][j % 4], 2, high);
          q0 = int4_pair(w.q[1][j % 4], 0, high), q2 = int4_pair(w.q[1][j % 4], 2, high);
        }
        const float4 zero = make_float4(0, 0, 0, 0);
        const float4 xa = has0 ? *reinterpret_cast<const float4*>(x0 + kk) : zero;
        XPairs xp = split_x({xa, zero});
        mma_bf16(sum0, p0, q0, p2, q2, xp.hi[0], xp.hi[1]);
        mma_bf16(sum0, p0, q0, p2, q2, xp.lo[0], xp.lo[1]);
        if constexpr (!F::kInt8) {
          mma_bf16(xs0, kOnes, kOnes, kOnes, kOnes, xp.hi[0], xp.hi[1]);
          mma_bf16(xs0, kOnes, kOnes, kOnes, kOnes, xp.lo[0], xp.lo[1]);
        }
        if constexpr (kTwoTiles) {
          const float4 xb = has1 ? *reinterpret_cast<const float4*>(x1 + kk) : zero;
          xp = split_x({xb, zero});
          mma_bf16(sum1, p0, q0, p2, q2, xp.hi[0], xp.hi[1]);
          mma_bf16(sum1, p0, q0, p2, q2, xp.lo[0], xp.lo[1]);
          if constexpr (!F::kInt8) {
            mma_bf16(xs1, kOnes, kOnes, kOnes, kOnes, xp.hi[0], xp.hi[1]);
            mma_bf16(xs1, kOnes, kOnes, kOnes, kOnes, xp.lo[0], xp.lo[1]);
          }
        }
      }
      // Element e belongs to weight row g (e < 2) or g + 8: that row's scale (and offset).
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t head = w.head[e < 2 ? 0 : 1];
        if constexpr (F::kInt8) {
          const float d = __uint_as_float(head);
          acc0[e] = __fmaf_rn(d, sum0[e], acc0[e]);
          if constexpr (kTwoTiles) acc1[e] = __fmaf_rn(d, sum1[e], acc1[e]);
        } else {
          const float d = half_value(head, 0), m = half_value(head, 1);
          acc0[e] = __fmaf_rn(d, sum0[e], __fmaf_rn(m, xs0[e], acc0[e]));
          if constexpr (kTwoTiles) acc1[e] = __fmaf_rn(d, sum1[e], __fmaf_rn(m, xs1[e], acc1[e]));
        }
      }
      w = next;
    }
    finish_tile<kTwoTiles>(group, tile, acc0, acc1, reduce, last_block, block_splits, partials,
                           tickets);
    rows = next_rows;
  }
}

template <DType kType>
void launch(const MatmulGroup& group, const SmallMatmulPlan& plan, const MatmulScratch& scratch,
            cudaStream_t stream) {
  Launch launch(dim3(static_cast<unsigned>(plan.grid_x), plan.block_splits), dim3(kWarps * 32), 0,
                stream);
  auto kernel = group.part[0].m > 8 ? small_int_mma_kernel<kType, true>
                                    : small_int_mma_kernel<kType, false>;
  check(cudaLaunchKernelEx(&launch.config, kernel, group, plan.block_splits, scratch.partials,
                           scratch.tickets),
        "small_int_mma_kernel");
}

}  // namespace

void launch_int(const MatmulGroup& group, const SmallMatmulPlan& plan,
                const MatmulScratch& scratch, cudaStream_t stream) {
  if (group.part[0].w_dtype == DType::kInt8) {
    launch<DType::kInt8>(group, plan, scratch, stream);
  } else {
    launch<DType::kInt4>(group, plan, scratch, stream);
  }
}

}  // namespace specd::cuda::small_mma
