// Lane-level dequantisation of GGUF's block formats (layouts in backend/quant_ref.h), shared by
// the small-M matmul, the bf16 slab dequantiser and the embedding kernel (gguf_quant.cu).
//
// A row is walked in chunks of 256 elements: 8 blocks of 32 (q8_0, q4_0, q4_1, q5_0, q5_1; 4
// lanes per block) or one super-block of 256 (q4_k, q5_k, q6_k; 32 lanes per block). Each lane
// of a warp owns 8 weights of a chunk, as two runs of 4 consecutive elements, and computes them
// with the reference's operations in the reference's order (each rounded, no fused multiply-add),
// so every weight is bit-identical to dequantize_row's.
#pragma once

#include "backend/cuda/device.cuh"

namespace specd::cuda::gguf {

constexpr int kChunkElems = 256;
constexpr float k2p23 = 8388608.0f;  // byte_value(bytes, e, k2p23 + o) is byte e minus o

// Two bytes at a 2-byte aligned address, zero-extended.
__device__ __forceinline__ uint32_t load_u16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
// Four bytes (little-endian) at a 2-byte aligned address.
__device__ __forceinline__ uint32_t load_u32_2(const uint8_t* p) {
  return load_u16(p) | (load_u16(p + 2) << 16);
}

// Bits 0..3 of t moved to bit 0 of bytes 0..3.
__device__ __forceinline__ uint32_t spread_bits(uint32_t t) {
  return ((t & 0xFu) * 0x00204081u) & 0x01010101u;
}

// The 6-bit scale and min of sub-block j (0..7) of a q4_k/q5_k block, from its 12 scale bytes
// s0..s2 (little-endian words), as k_quant_scale_min; both as exact floats.
__device__ __forceinline__ void scale_min(int j, uint32_t s0, uint32_t s1, uint32_t s2,
                                          float* scale, float* min) {
  const int shift = 8 * (j & 3);
  const uint32_t a = (s0 >> shift) & 0xFFu, b = (s1 >> shift) & 0xFFu, c = (s2 >> shift) & 0xFFu;
  const uint32_t sc = j < 4 ? a & 63u : (c & 0xFu) | ((a >> 6) << 4);
  const uint32_t mn = j < 4 ? b & 63u : (c >> 4) | ((b >> 6) << 4);
  *scale = static_cast<float>(sc);
  *min = static_cast<float>(mn);
}

// w[e] = (byte e of lo - o) * d_lo and w[4 + e] = (byte e of hi - o) * d_hi for e < 4, each
// product rounded: the formats whose weight is a scaled code.
__device__ __forceinline__ void scale_runs(uint32_t lo, uint32_t hi, float o, float d_lo,
                                           float d_hi, float (&w)[8]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = __fmul_rn(byte_value(lo, e, k2p23 + o), d_lo);
    w[4 + e] = __fmul_rn(byte_value(hi, e, k2p23 + o), d_hi);
  }
}

// w[e] = byte e of lo * d_lo - m_lo and w[4 + e] = byte e of hi * d_hi - m_hi, each operation
// rounded: the formats with a min (a q4_1-style + m is - (-m), the same rounded sum).
__device__ __forceinline__ void scale_shift_runs(uint32_t lo, uint32_t hi, float d_lo, float m_lo,
                                                 float d_hi, float m_hi, float (&w)[8]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = __fsub_rn(__fmul_rn(byte_value(lo, e, k2p23), d_lo), m_lo);
    w[4 + e] = __fsub_rn(__fmul_rn(byte_value(hi, e, k2p23), d_hi), m_hi);
  }
}

// A format F has:
//   kElems, kBytes: elements and bytes of a block; kWords: 32-bit words a lane loads per block;
//   run(part, r): the offset in the block of the lane's run r (0 or 1) of 4 elements, where part
//     is the lane's index among the kElems / 8 lanes sharing a block;
//   load(block, part, v): the lane's bytes of the block (2-byte aligned block; 4-byte aligned for
//     the formats with 4-byte multiple sizes);
//   dequant(v, part, w): the lane's 8 weights, run 0 then run 1.

// q8_0: f16 d, i8 qs[32]; part p holds elements 8p..8p+7.
struct Q8_0 {
  static constexpr int kElems = 32, kBytes = 34, kWords = 3;
  __device__ static int run(int part, int r) { return 8 * part + 4 * r; }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_u16(b);
    v[1] = load_u32_2(b + 2 + 8 * part);
    v[2] = load_u32_2(b + 6 + 8 * part);
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int, float (&w)[8]) {
    const float d = half_value(v[0], 0);
    // int8 q -> q + 128, then minus 128
    scale_runs(v[1] ^ 0x80808080u, v[2] ^ 0x80808080u, 128.0f, d, d, w);
  }
};

// q4_0: f16 d, u8 qs[16]; part p holds qs[4p..4p+3]: elements 4p.. (low) and 16 + 4p.. (high).
struct Q4_0 {
  static constexpr int kElems = 32, kBytes = 18, kWords = 2;
  __device__ static int run(int part, int r) { return 4 * part + 16 * r; }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_u16(b);
    v[1] = load_u32_2(b + 2 + 4 * part);
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int, float (&w)[8]) {
    const float d = half_value(v[0], 0);
    scale_runs(v[1] & 0x0F0F0F0Fu, (v[1] >> 4) & 0x0F0F0F0Fu, 8.0f, d, d, w);
  }
};

// q4_1: f16 d, f16 m, u8 qs[16]; parts as q4_0.
struct Q4_1 {
  static constexpr int kElems = 32, kBytes = 20, kWords = 2;
  __device__ static int run(int part, int r) { return 4 * part + 16 * r; }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_word(b);
    v[1] = load_word(b + 4 + 4 * part);
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int, float (&w)[8]) {
    const float d = half_value(v[0], 0), m = half_value(v[0], 1);
    scale_shift_runs(v[1] & 0x0F0F0F0Fu, (v[1] >> 4) & 0x0F0F0F0Fu, d, -m, d, -m, w);
  }
};

// q5_0: f16 d, u8 qh[4] (bit j: 5th bit of element j), u8 qs[16]; parts as q4_0.
struct Q5_0 {
  static constexpr int kElems = 32, kBytes = 22, kWords = 3;
  __device__ static int run(int part, int r) { return 4 * part + 16 * r; }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_u16(b);
    v[1] = load_u32_2(b + 2);
    v[2] = load_u32_2(b + 6 + 4 * part);
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int part, float (&w)[8]) {
    const float d = half_value(v[0], 0);
    const uint32_t lo = (v[2] & 0x0F0F0F0Fu) | (spread_bits(v[1] >> (4 * part)) << 4);
    const uint32_t hi = ((v[2] >> 4) & 0x0F0F0F0Fu) | (spread_bits(v[1] >> (16 + 4 * part)) << 4);
    scale_runs(lo, hi, 16.0f, d, d, w);
  }
};

// q5_1: f16 d, f16 m, u8 qh[4], u8 qs[16]; parts as q4_0.
struct Q5_1 {
  static constexpr int kElems = 32, kBytes = 24, kWords = 3;
  __device__ static int run(int part, int r) { return 4 * part + 16 * r; }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_word(b);
    v[1] = load_word(b + 4);
    v[2] = load_word(b + 8 + 4 * part);
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int part, float (&w)[8]) {
    const float d = half_value(v[0], 0), m = half_value(v[0], 1);
    const uint32_t lo = (v[2] & 0x0F0F0F0Fu) | (spread_bits(v[1] >> (4 * part)) << 4);
    const uint32_t hi = ((v[2] >> 4) & 0x0F0F0F0Fu) | (spread_bits(v[1] >> (16 + 4 * part)) << 4);
    scale_shift_runs(lo, hi, d, -m, d, -m, w);
  }
};

// q4_k: f16 d, f16 dmin, u8 scales[12], u8 qs[128]. Part p (0..31) holds qs[32i + l..l+3] with
// i = p / 8, l = 4 (p % 8): elements 64i + l.. (sub-block 2i, low nibbles) and 64i + 32 + l..
// (sub-block 2i + 1, high nibbles).
struct Q4_K {
  static constexpr int kElems = 256, kBytes = 144, kWords = 5;
  __device__ static int run(int part, int r) { return 64 * (part / 8) + 32 * r + 4 * (part % 8); }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_word(b);
    v[1] = load_word(b + 4);
    v[2] = load_word(b + 8);
    v[3] = load_word(b + 12);
    v[4] = load_word(b + 16 + 32 * (part / 8) + 4 * (part % 8));
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int part, float (&w)[8]) {
    const float d = half_value(v[0], 0), dmin = half_value(v[0], 1);
    const int i = part / 8;
    float sc, mn;
    scale_min(2 * i, v[1], v[2], v[3], &sc, &mn);
    const float d1 = __fmul_rn(d, sc), m1 = __fmul_rn(dmin, mn);
    scale_min(2 * i + 1, v[1], v[2], v[3], &sc, &mn);
    const float d2 = __fmul_rn(d, sc), m2 = __fmul_rn(dmin, mn);
    const uint32_t lo = v[4] & 0x0F0F0F0Fu, hi = (v[4] >> 4) & 0x0F0F0F0Fu;
    scale_shift_runs(lo, hi, d1, m1, d2, m2, w);
  }
};

// q5_k: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]; parts as q4_k, the 5th bits of
// sub-blocks 2i and 2i + 1 in bits 2i and 2i + 1 of qh[l..l+3].
struct Q5_K {
  static constexpr int kElems = 256, kBytes = 176, kWords = 6;
  __device__ static int run(int part, int r) { return 64 * (part / 8) + 32 * r + 4 * (part % 8); }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    v[0] = load_word(b);
    v[1] = load_word(b + 4);
    v[2] = load_word(b + 8);
    v[3] = load_word(b + 12);
    v[4] = load_word(b + 16 + 4 * (part % 8));
    v[5] = load_word(b + 48 + 32 * (part / 8) + 4 * (part % 8));
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int part, float (&w)[8]) {
    const float d = half_value(v[0], 0), dmin = half_value(v[0], 1);
    const int i = part / 8;
    float sc, mn;
    scale_min(2 * i, v[1], v[2], v[3], &sc, &mn);
    const float d1 = __fmul_rn(d, sc), m1 = __fmul_rn(dmin, mn);
    scale_min(2 * i + 1, v[1], v[2], v[3], &sc, &mn);
    const float d2 = __fmul_rn(d, sc), m2 = __fmul_rn(dmin, mn);
    const uint32_t lo = (v[5] & 0x0F0F0F0Fu) | (((v[4] >> (2 * i)) & 0x01010101u) << 4);
    const uint32_t hi = ((v[5] >> 4) & 0x0F0F0F0Fu) | (((v[4] >> (2 * i + 1)) & 0x01010101u) << 4);
    scale_shift_runs(lo, hi, d1, m1, d2, m2, w);
  }
};

// q6_k: u8 ql[128], u8 qh[64], i8 scales[16], f16 d. Part p (0..31): half n = p / 16, g =
// (p / 8) % 2, l = 4 (p % 8); it holds ql[64n + 32g + l..l+3] and qh[32n + l..l+3]: elements
// 128n + 32g + l.. (low nibbles, qh bits 2g, 2g + 1) and 128n + 64 + 32g + l.. (high nibbles, qh
// bits 2g + 4, 2g + 5), scales 8n + l / 16 + 2g and that + 4.
struct Q6_K {
  static constexpr int kElems = 256, kBytes = 210, kWords = 4;
  __device__ static int run(int part, int r) {
    return 128 * (part / 16) + 64 * r + 32 * ((part / 8) % 2) + 4 * (part % 8);
  }
  __device__ static void load(const uint8_t* b, int part, uint32_t (&v)[kWords]) {
    const int n = part / 16, g = (part / 8) % 2, l = 4 * (part % 8);
    const uint8_t* sc = b + 192 + 8 * n + l / 16 + 2 * g;
    v[0] = load_u16(b + 208);
    v[1] = load_u32_2(b + 64 * n + 32 * g + l);
    v[2] = load_u32_2(b + 128 + 32 * n + l);
    v[3] = static_cast<uint32_t>(__ldg(sc)) | (static_cast<uint32_t>(__ldg(sc + 4)) << 8);
  }
  __device__ static void dequant(const uint32_t (&v)[kWords], int part, float (&w)[8]) {
    const float d = half_value(v[0], 0);
    const int g = (part / 8) % 2;
    const float d_lo = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(v[3] & 0xFFu)));
    const float d_hi = __fmul_rn(d, static_cast<float>(static_cast<int8_t>(v[3] >> 8)));
    const uint32_t lo = (v[1] & 0x0F0F0F0Fu) | (((v[2] >> (2 * g)) & 0x03030303u) << 4);
    const uint32_t hi = ((v[1] >> 4) & 0x0F0F0F0Fu) | (((v[2] >> (2 * g + 4)) & 0x03030303u) << 4);
    scale_runs(lo, hi, 32.0f, d_lo, d_hi, w);
  }
};

// Where lane `lane` works in chunk `chunk` of a row of F blocks.
template <class F>
struct LaneSlot {
  static constexpr int kLanesPerBlock = F::kElems / 8;
  static constexpr int kBlocksPerChunk = kChunkElems / F::kElems;
  int64_t block;  // block index in the row (may be past the row's end in its last chunk)
  int part;       // index among the lanes sharing the block

  __device__ LaneSlot(int64_t chunk, int lane)
      : block(chunk * kBlocksPerChunk + lane / kLanesPerBlock), part(lane % kLanesPerBlock) {}
  // Element offset in the row of run r.
  __device__ int64_t offset(int r) const { return block * F::kElems + F::run(part, r); }
};

}  // namespace specd::cuda::gguf
