// Small-M matmul (1 to 16 rows) of specd's load-time int8 and int4 weights (128-element blocks:
// int8 f32 d + int8 q[128], y = d q; int4 f16 d, f16 m + 64 bytes of nibbles, y = d q + m) on
// integer tensor cores, batch-invariant.
//
// x is first written as two int8 parts per 128-element block of each row (quantize_x_kernel):
// s = max|x| / 127, a = round(x / s), b = round((x / s - a) * 254), so x ~ s (a + b / 254) to
// about 2^-16 of the block's largest value. The weight codes then enter mma.m16n8k32 unchanged
// (int8 as s8, int4 nibbles as u8), each block's two products a · q and b · q are exact integer
// sums, and acc += d s (sum_a + sum_b / 254) adds the block in K order (int4: + m · the sum of
// x's quantised values). A warp owns a tile of 16 weight rows and a contiguous K range of whole
// blocks (the bf16 kernel's plan, K split and fixed-order reduction; blocks interleaved over the
// warps were 0.5-2% slower). The weights are stored in
// groups of 8 rows, 64-byte pieces of the 8 rows side by side (int_rows.cuh), so lane (g, c) loads
// its codes of weight rows g and g + 8 with 16-byte loads that together read 512 contiguous bytes:
// bytes 16c .. 16c + 15 of each 64-byte piece of a block (int8: k = 16c .. and 64 + 16c ..; int4:
// low nibbles k = 16c .., high nibbles k + 64). Integer sums do not depend on the order of k, so
// each lane's words are its mma fragments as they come, and x's words are read in the same k
// order. The next step's words are loaded while this one multiplies (the first before waiting
// for the previous kernel); for up to 8 rows int4 takes two blocks per step, as many bytes in
// flight as int8.
//
// Up to 4 rows (a decode step, a short verification), x is stacked: the mma's 8 B columns hold
// each row's a and b parts side by side, so one mma per k step yields both sums (half the mma
// and half the x words), lane (g, c) scales x row c, and int8 also takes two blocks per step.
// The integer sums are the same and each (row, column) is scaled and added in the same order, so
// the bits equal those of 5 to 16 rows (SPECD_CUDA_INT_STACK=0 turns it off). With 9 to 12 rows
// the second tile (x rows 8-11) is stacked the same way.
#include "backend/cuda/int_rows.cuh"
#include "backend/cuda/int_x.cuh"
#include "backend/cuda/small_mma.cuh"

namespace specd::cuda::small_mma {
namespace {

using int_x::kBlockK;
using int_x::kLoScale;
using int_x::kXBlockBytes;
using int_x::x_quant_view;
using int_x::XQuant;

constexpr int kPieceStride = kIntGroupRows * kIntPieceBytes;  // piece p to p + 1 of a group

template <DType kType>
struct Format {
  static constexpr bool kInt8 = kType == DType::kInt8;
  static constexpr int kCodeBytes = int_code_bytes(kType);
  static constexpr int kWords = kInt8 ? 8 : 4;  // code words per lane and row
  static constexpr int kPieces = kCodeBytes / kIntPieceBytes;
};

// One warp per (row, block): lane L quantises elements 4L .. 4L + 3 of x (of act(gate) * x when
// a.gate is set). A block with a NaN or an infinity gets a NaN scale, so the products it enters
// are NaN as a float product would be.
__global__ void __launch_bounds__(256) quantize_x_kernel(MatmulArgs a, XQuant q) {
  wait_for_inputs();
  allow_next_kernel();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = blockIdx.x * 8LL + warp;
  if (item >= a.m * q.n_blocks) return;
  const int64_t row = item / q.n_blocks, k = item % q.n_blocks * kBlockK + 4 * lane;
  const float4 v4 = *reinterpret_cast<const float4*>(a.x + row * a.x_stride + k);
  float v[4] = {v4.x, v4.y, v4.z, v4.w};
  if (a.gate != nullptr) {
    const float4 g4 = *reinterpret_cast<const float4*>(a.gate + row * a.gate_stride + k);
    const float g[4] = {g4.x, g4.y, g4.z, g4.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = gated(a.gate_act, g[e], v[e]);
  }
  float amax = 0.0f;
  bool finite = true;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    amax = fmaxf(amax, fabsf(v[e]));
    finite = finite && isfinite(v[e]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, o));
  finite = __all_sync(~0u, finite);
  const float inv = int_x::block_inverse(amax, finite);
  uint32_t word_a = 0, word_b = 0;
  int sum_a = 0, sum_b = 0;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    int a, b;
    int_x::element_parts(v[e], inv, a, b);
    word_a |= (static_cast<uint32_t>(a) & 0xFFu) << (8 * e);
    word_b |= (static_cast<uint32_t>(b) & 0xFFu) << (8 * e);
    sum_a += a;
    sum_b += b;
  }
  int8_t* out = q.codes + item * kXBlockBytes + 4 * lane;
  *reinterpret_cast<uint32_t*>(out) = word_a;
  *reinterpret_cast<uint32_t*>(out + kBlockK) = word_b;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    sum_a += __shfl_xor_sync(~0u, sum_a, o);
    sum_b += __shfl_xor_sync(~0u, sum_b, o);
  }
  if (lane == 0) q.scales[item] = int_x::block_scales(amax, finite, sum_a, sum_b);
}

// d += a (16 x 32 weight codes: s8 for int8, u8 for int4 nibbles) times b (32 x 8 s8 x parts).
template <DType kType>
__device__ __forceinline__ void mma_codes(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
#define SPECD_MMA_CODES(ATYPE)                                                 \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." ATYPE                  \
               ".s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
  if constexpr (kType == DType::kInt8) {
    SPECD_MMA_CODES("s8");
  } else {
    SPECD_MMA_CODES("u8");
  }
#undef SPECD_MMA_CODES
}

// 16 bytes of weights (16-byte aligned; L2 `policy`), and a 4-byte header.
__device__ __forceinline__ uint4 load_codes(const uint8_t* p, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint32_t load_header(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint32_t*>(p));
}

// The step's kPer blocks of weight rows g and g + 8 for this lane: headers and code words.
template <DType kType, int kPer>
struct Step {
  uint32_t head[kPer][2];
  uint32_t q[kPer][2][Format<kType>::kWords];
};

// One x row's part of a block for lane (g, c): the a and b words of mma steps j = 0..3 (words
// 2j and 2j + 1), at the k of the lane's weight words.
struct XWords {
  uint4 a[2], b[2];
  static __device__ __forceinline__ uint32_t word(const uint4 (&p)[2], int i) {
    const uint4& v = p[i / 4];
    return i % 4 == 0 ? v.x : i % 4 == 1 ? v.y : i % 4 == 2 ? v.z : v.w;
  }
};
// One part (0: a, 1: b) of an x row's block at the lane's k, 16c .. 16c + 15 and 64 + 16c ..
// 64 + 16c + 15 (zeros where not `valid`).
__device__ __forceinline__ void load_x_part(const int8_t* block, int part, bool valid, int c,
                                            uint4 (&out)[2]) {
  const int8_t* p = block + part * kBlockK + 16 * c;
  out[0] = valid ? *reinterpret_cast<const uint4*>(p) : make_uint4(0, 0, 0, 0);
  out[1] = valid ? *reinterpret_cast<const uint4*>(p + 64) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ XWords load_x_words(const int8_t* block, bool valid, int c) {
  XWords x{};
  if (!valid) return x;
  load_x_part(block, 0, true, c, x.a);
  load_x_part(block, 1, true, c, x.b);
  return x;
}

// The weight words of mma step j (0..3) of a block for rows g, g + 8: the lane's words 2j (w[0],
// w[1]) and 2j + 1 (w[2], w[3]); int8 word i holds k = 16c + 4i (i < 4) or 64 + 16c + 4(i - 4),
// int4 word i low nibbles k = 16c + 4i, high nibbles k + 64.
template <DType kType>
__device__ __forceinline__ void weight_words(const uint32_t (&q)[2][Format<kType>::kWords], int j,
                                             uint32_t (&w)[4]) {
  if constexpr (Format<kType>::kInt8) {
    w[0] = q[0][2 * j], w[1] = q[1][2 * j], w[2] = q[0][2 * j + 1], w[3] = q[1][2 * j + 1];
  } else {
    const int shift = j >= 2 ? 4 : 0, i = 2 * (j % 2);
    w[0] = (q[0][i] >> shift) & 0x0F0F0F0Fu, w[1] = (q[1][i] >> shift) & 0x0F0F0F0Fu;
    w[2] = (q[0][i + 1] >> shift) & 0x0F0F0F0Fu, w[3] = (q[1][i + 1] >> shift) & 0x0F0F0F0Fu;
  }
}

// sum_a / sum_b (+)= the block's products of weight rows g, g + 8 with one tile of x rows.
template <DType kType>
__device__ __forceinline__ void multiply_block(const uint32_t (&q)[2][Format<kType>::kWords],
                                               const XWords& x, int (&sum_a)[4], int (&sum_b)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t w[4];
    weight_words<kType>(q, j, w);
    mma_codes<kType>(sum_a, w, x.word(x.a, 2 * j), x.word(x.a, 2 * j + 1));
    mma_codes<kType>(sum_b, w, x.word(x.b, 2 * j), x.word(x.b, 2 * j + 1));
  }
}

// With up to 4 x rows: B's column 2r holds row r's a part and column 2r + 1 its b part (lane
// (g, c) loads part g & 1 of row g / 2), so one mma per step gives both sums: sum[0] / sum[1] are
// the a / b sums of x row c with weight row g, sum[2] / sum[3] with weight row g + 8.
template <DType kType>
__device__ __forceinline__ void multiply_block_stacked(
    const uint32_t (&q)[2][Format<kType>::kWords], const uint4 (&part)[2], int (&sum)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t w[4];
    weight_words<kType>(q, j, w);
    mma_codes<kType>(sum, w, XWords::word(part, 2 * j), XWords::word(part, 2 * j + 1));
  }
}

// acc + the block's sums of one (weight row, x row) scaled: `head` is the weight row's block
// header, s the x row's (scale, scaled sum).
template <DType kType>
__device__ __forceinline__ float add_sums(float acc, uint32_t head, int sum_a, int sum_b,
                                          float2 s) {
  const float dot = __fmaf_rn(static_cast<float>(sum_b), kLoScale, static_cast<float>(sum_a));
  if constexpr (Format<kType>::kInt8) {
    return __fmaf_rn(__fmul_rn(__uint_as_float(head), s.x), dot, acc);
  } else {
    const float d = half_value(head, 0), m = half_value(head, 1);
    return __fmaf_rn(__fmul_rn(d, s.x), dot, __fmaf_rn(m, s.y, acc));
  }
}

// acc += the block's sums scaled: element e is weight row g (e < 2) or g + 8 and x row 2c + e % 2.
template <DType kType>
__device__ __forceinline__ void add_block(float (&acc)[4], const uint32_t (&head)[2],
                                          const int (&sum_a)[4], const int (&sum_b)[4],
                                          float2 xs_even, float2 xs_odd) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    acc[e] = add_sums<kType>(acc[e], head[e < 2 ? 0 : 1], sum_a[e], sum_b[e],
                             e % 2 == 0 ? xs_even : xs_odd);
  }
}

// kPer: blocks loaded together (see launch()). kStacked: up to 4 rows, both x parts in one mma
// (multiply_block_stacked); with kTwoTiles (9 to 12 rows) only the second tile's rows 8-11 are
// stacked. The bits are those of the unstacked kernel (the same integer sums, scaled in the same
// order).
template <DType kType, bool kTwoTiles, int kPer, bool kStacked = false>
__global__ void __launch_bounds__(kWarps * 32, 2)
    small_int_mma_kernel(MatmulGroup group, XQuant xq, int block_splits, float* partials,
                         unsigned* tickets) {
  using F = Format<kType>;
  __shared__ float reduce[kWarps][kMaxRows][kTileN];
  __shared__ bool last_block;
  __shared__ float inv_rms[kMaxRows];    // a folded norm's (finish_tile)
  const MatmulArgs& a0 = group.part[0];  // x, m, k and the weight dtype are shared
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  const int64_t tiles = group.tile_end[group.count - 1];
  const int64_t splits = static_cast<int64_t>(block_splits) * kWarps;
  const int64_t split = blockIdx.y * static_cast<int64_t>(kWarps) + warp;
  const int64_t n_blocks = xq.n_blocks;
  // The warp's blocks: [first, first + mine), the same for every row count.
  const int first = static_cast<int>(n_blocks * split / splits);
  const int mine = static_cast<int>(n_blocks * (split + 1) / splits) - first;
  const int64_t steps = (mine + kPer - 1) / kPer;
  const uint64_t policy = weights_l2_policy();

  // Rows g and g + 8 of a tile (row g of the part, never used, past its end): the lane's bytes
  // of their first piece and their headers of block 0. Each half of a tile is one group of 8 rows
  // (tile_column keeps 8 rows together), row g of it.
  struct Rows {
    const uint8_t* codes[2];
    const uint8_t* headers[2];
    bool ok[2];
  };
  auto rows_of = [&](int64_t tile) {
    Rows out{};
    if (tile >= tiles) return out;
    const TileSpot spot = find_tile(group, tile);
    const MatmulArgs& a = group.part[spot.part];
    const IntLayout layout = int_layout(kType, a.w_stride);
    const auto* w = static_cast<const uint8_t*>(a.w);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = tile_column(a, spot.n0, g + 8 * h);
      out.ok[h] = n < a.n;
      out.codes[h] = w + int_code_offset(layout, out.ok[h] ? n : g, 16 * c);
      out.headers[h] = w + int_header_offset(layout, out.ok[h] ? n : g, 0);
    }
    return out;
  };
  // Step s of this warp's K range: blocks s * kPer + p (all zero past the part's rows or
  // past the warp's blocks).
  auto load_step = [&](const Rows& rows, int64_t s) {
    Step<kType, kPer> out;
#pragma unroll
    for (int p = 0; p < kPer; ++p) {
      const int64_t i = s * kPer + p;
      const int64_t block = first + i;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool ok = rows.ok[h] && i < mine;
        const uint8_t* codes = rows.codes[h] + block * F::kPieces * kPieceStride;
        out.head[p][h] = ok ? load_header(rows.headers[h] + block * kIntGroupRows * 4) : 0u;
#pragma unroll
        for (int v = 0; v < F::kPieces; ++v) {
          const uint4 u =
              ok ? load_codes(codes + v * kPieceStride, policy) : make_uint4(0, 0, 0, 0);
          out.q[p][h][4 * v] = u.x, out.q[p][h][4 * v + 1] = u.y;
          out.q[p][h][4 * v + 2] = u.z, out.q[p][h][4 * v + 3] = u.w;
        }
      }
    }
    return out;
  };

  Rows rows = rows_of(blockIdx.x);
  Step<kType, kPer> w = steps > 0 ? load_step(rows, 0) : Step<kType, kPer>{};
  wait_for_inputs();
  allow_next_kernel();
  prefetch_norm_sums(a0.norm_in, a0.m);
  const bool has0 = g < a0.m, has1 = g + 8 < a0.m;
  // x rows of the accumulator elements: 2c, 2c + 1 (acc0) and 2c + 8, 2c + 9 (acc1).
  const bool scaled[4] = {2 * c < a0.m, 2 * c + 1 < a0.m, 2 * c + 8 < a0.m, 2 * c + 9 < a0.m};

  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const Rows next_rows = rows_of(tile + gridDim.x);
    float acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
    for (int64_t s = 0; s < steps; ++s) {
      // The next step: this tile's, or the next tile's first.
      const Step<kType, kPer> next =
          s + 1 < steps ? load_step(rows, s + 1) : load_step(next_rows, 0);
#pragma unroll
      for (int p = 0; p < kPer; ++p) {
        const int64_t i = s * kPer + p;
        if (i >= mine) break;  // the same for the whole warp
        const int64_t block = first + i;
        if constexpr (kStacked && !kTwoTiles) {
          const float2 xs = c < a0.m ? xq.scales[c * n_blocks + block] : make_float2(0, 0);
          uint4 part[2];
          load_x_part(xq.codes + ((g >> 1) * n_blocks + block) * kXBlockBytes, g & 1,
                      (g >> 1) < a0.m, c, part);
          int sum[4] = {0, 0, 0, 0};
          multiply_block_stacked<kType>(w.q[p], part, sum);
          acc0[0] = add_sums<kType>(acc0[0], w.head[p][0], sum[0], sum[1], xs);
          acc0[1] = add_sums<kType>(acc0[1], w.head[p][1], sum[2], sum[3], xs);
        } else {
          float2 xs[4];
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t x_row = 2 * c + (r & 1) + (r >= 2 ? 8 : 0);
            xs[r] = scaled[r] ? xq.scales[x_row * n_blocks + block] : make_float2(0, 0);
          }
          int sum_a[4] = {0, 0, 0, 0}, sum_b[4] = {0, 0, 0, 0};
          const XWords x0 = load_x_words(xq.codes + (g * n_blocks + block) * kXBlockBytes, has0, c);
          multiply_block<kType>(w.q[p], x0, sum_a, sum_b);
          add_block<kType>(acc0, w.head[p], sum_a, sum_b, xs[0], xs[1]);
          if constexpr (kTwoTiles && kStacked) {  // x rows 8 + c, as the stacked branch above
            const float2 xs1 =
                8 + c < a0.m ? xq.scales[(8 + c) * n_blocks + block] : make_float2(0, 0);
            uint4 part[2];
            load_x_part(xq.codes + ((8 + (g >> 1)) * n_blocks + block) * kXBlockBytes, g & 1,
                        8 + (g >> 1) < a0.m, c, part);
            int sum[4] = {0, 0, 0, 0};
            multiply_block_stacked<kType>(w.q[p], part, sum);
            acc1[0] = add_sums<kType>(acc1[0], w.head[p][0], sum[0], sum[1], xs1);
            acc1[1] = add_sums<kType>(acc1[1], w.head[p][1], sum[2], sum[3], xs1);
          } else if constexpr (kTwoTiles) {
            int sum_a1[4] = {0, 0, 0, 0}, sum_b1[4] = {0, 0, 0, 0};
            const XWords x1 =
                load_x_words(xq.codes + ((g + 8) * n_blocks + block) * kXBlockBytes, has1, c);
            multiply_block<kType>(w.q[p], x1, sum_a1, sum_b1);
            add_block<kType>(acc1, w.head[p], sum_a1, sum_b1, xs[2], xs[3]);
          }
        }
      }
      w = next;
    }
    constexpr AccLayout kLayout = !kStacked   ? AccLayout::kWeightsInA
                                  : kTwoTiles ? AccLayout::kSecondTileRowPerLane
                                              : AccLayout::kXRowPerLane;
    finish_tile<kTwoTiles, false, kLayout>(group, tile, acc0, acc1, reduce, last_block,
                                           block_splits, partials, tickets, inv_rms);
    rows = next_rows;
  }
}

template <DType kType>
void launch(const MatmulGroup& group, const SmallMatmulPlan& plan, const XQuant& xq,
            const MatmulScratch& scratch, cudaStream_t stream) {
  Launch launch(dim3(static_cast<unsigned>(plan.grid_x), plan.block_splits), dim3(kWarps * 32), 0,
                stream);
  // int4 loads two blocks per step for M <= 8 only: with the second x tile the registers of
  // the second block would spill.
  constexpr int kPer = kType == DType::kInt8 ? 1 : 2;
  // Stacked (up to 4 rows), x's words take half the registers, so int8 loads two blocks per step
  // too (one H200: int8 decode +2.9% against one block).
  // 9 to 12 rows stack the second tile's rows (x rows 8-11): 12 mma a block instead of 16 (one
  // H200: the 9-row products 6-9% faster in int8, 9-14% in int4 once the weights were stored in
  // groups of 8 rows).
  const int64_t m = group.part[0].m;
  auto kernel = m > 12 || (m > 8 && !plan.stacked_x) ? small_int_mma_kernel<kType, true, 1>
                : m > 8                              ? small_int_mma_kernel<kType, true, 1, true>
                : m > 4 || !plan.stacked_x           ? small_int_mma_kernel<kType, false, kPer>
                                                     : small_int_mma_kernel<kType, false, 2, true>;
  check(cudaLaunchKernelEx(&launch.config, kernel, group, xq, plan.block_splits, scratch.partials,
                           scratch.tickets),
        "small_int_mma_kernel");
}

}  // namespace

void launch_int(const MatmulGroup& group, const SmallMatmulPlan& plan, const MatmulScratch& scratch,
                cudaStream_t stream) {
  const MatmulArgs& a = group.part[0];
  const XQuant xq = x_quant_view(scratch.x_int8, a.m, a.k);
  if (!scratch.x_int8_ready) {
    const int64_t items = a.m * xq.n_blocks;
    Launch quantize(dim3(static_cast<unsigned>((items + 7) / 8)), dim3(256), 0, stream);
    check(cudaLaunchKernelEx(&quantize.config, quantize_x_kernel, a, xq), "quantize_x_kernel");
  }
  if (a.w_dtype == DType::kInt8) {
    launch<DType::kInt8>(group, plan, xq, scratch, stream);
  } else {
    launch<DType::kInt4>(group, plan, xq, scratch, stream);
  }
}

}  // namespace specd::cuda::small_mma

namespace specd::cuda {

bool small_gate_fusable(const MatmulArgs& a) {
  const bool gate_ok =
      a.gate != nullptr && a.gate_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.gate) % 16 == 0;
  return gate_ok && int_quant_dtype(a.w_dtype) && small_tensor_cores(a);
}

size_t small_int_x_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>(m * (k / small_mma::kBlockK)) *
         (small_mma::kXBlockBytes + sizeof(float2));
}

}  // namespace specd::cuda
