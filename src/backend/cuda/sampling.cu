// Device-side token choice: the argmax of each logits row (greedy decoding and verification),
// and sampling (temperature, top-k, top-p, min-p, then an inverse-CDF draw) as the host's
// Sampler does it, so that sampled requests copy one token id per row instead of the row.
#include <cfloat>
#include <climits>

#include "backend/cuda/device.cuh"

namespace specd::cuda {
namespace {

constexpr int kThreads = 1024;

// True if logit (va at column ia) is chosen over (vb at ib) by a sequential scan that keeps the
// first maximum under `>`: larger first, then the lower column; a NaN wins only in column 0 and
// loses to any number elsewhere. A strict total order, so any reduction order gives one winner.
__device__ __forceinline__ bool better(float va, int ia, float vb, int ib) {
  const bool a_nan = isnan(va), b_nan = isnan(vb);
  if (a_nan || b_nan) {
    if (a_nan && ia == 0) return true;
    if (b_nan && ib == 0) return false;
    if (a_nan != b_nan) return b_nan;
    return ia < ib;
  }
  if (va != vb) return va > vb;
  return ia < ib;
}

// The argmax of one row over the block: strided per-thread scans, then a shuffle and a
// shared-memory reduction. Every thread gets the column.
__device__ int row_argmax(const float* row, int cols) {
  __shared__ float warp_v[kThreads / 32];
  __shared__ int warp_i[kThreads / 32];
  __shared__ int result;
  float v = 0.0f;
  int idx = INT_MAX;  // INT_MAX: nothing seen yet
#pragma unroll 4
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float x = row[c];
    if (idx == INT_MAX || better(x, c, v, idx)) v = x, idx = c;
  }
  auto take = [&](float ov, int oi) {
    if (oi != INT_MAX && (idx == INT_MAX || better(ov, oi, v, idx))) v = ov, idx = oi;
  };
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, offset);
    take(ov, oi);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_v[warp] = v;
    warp_i[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    v = warp_v[lane];
    idx = warp_i[lane];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, offset);
      take(ov, oi);
    }
    if (lane == 0) result = idx;
  }
  __syncthreads();
  return result;
}

__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* logits, int64_t stride, int cols, int32_t* ids) {
  wait_for_inputs();
  allow_next_kernel();
  const int idx = row_argmax(logits + blockIdx.x * stride, cols);
  if (threadIdx.x == 0) ids[blockIdx.x] = idx;
}

// ---- sampling: one block per row, every sum a fixed-order tree (the same bits on every run) ----

struct BlockScratch {
  double d[kThreads / 32];
  int i[kThreads / 32];
  unsigned hist[256];
  float f;
  unsigned u;
};

// Sum over the block in a fixed order: lanes by a butterfly, then warps in order.
__device__ double block_sum(double v, BlockScratch& s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();  // s.d may still be read by the previous call
  if (threadIdx.x % 32 == 0) s.d[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
#pragma unroll 8
  for (int w = 0; w < kThreads / 32; ++w) total += s.d[w];
  return total;
}

__device__ int block_sum(int v, BlockScratch& s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.i[threadIdx.x / 32] = v;
  __syncthreads();
  int total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += s.i[w];
  return total;
}

// Inclusive prefix over threads (thread order) of a per-thread double.
__device__ double block_prefix(double v, BlockScratch& s) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const double o = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += o;
  }
  __syncthreads();
  if (lane == 31) s.d[warp] = v;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += s.d[w];
  return before + v;
}

// Order-preserving key of a float (larger float, larger key).
__device__ __forceinline__ unsigned float_key(float f) {
  const unsigned b = __float_as_uint(f);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}
__device__ __forceinline__ float key_float(unsigned k) {
  return __uint_as_float(k & 0x80000000u ? k & 0x7FFFFFFFu : ~k);
}

// The k-th largest logit (radix select, 8 bits per pass; counts are exact integers).
__device__ float kth_largest(const float* row, int cols, int k, BlockScratch& s) {
  unsigned prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) s.hist[b] = 0;
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += kThreads) {
      const unsigned key = float_key(row[c]);
      if ((key & mask) == prefix) atomicAdd(&s.hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int seen = 0, bin = 0;
      for (bin = 255; bin > 0; --bin) {
        if (seen + static_cast<int>(s.hist[bin]) >= remaining) break;
        seen += static_cast<int>(s.hist[bin]);
      }
      s.u = static_cast<unsigned>(bin);
      s.i[0] = remaining - seen;
    }
    __syncthreads();
    prefix |= s.u << shift;
    mask |= 255u << shift;
    remaining = s.i[0];
    __syncthreads();
  }
  return key_float(prefix);
}

// Row blockIdx.x: the distribution of Sampler::distribution (candidates, exp of the scaled
// logits, the nucleus and min-p cut in probability order with ties by column), then the first
// column whose running sum in column order passes u times the kept mass. ids[r] = -1 when no
// logit is finite. weights: [rows, cols] f32 scratch.
__global__ void __launch_bounds__(kThreads) sample_kernel(SampleRowsArgs a) {
  __shared__ BlockScratch s;
  const int r = blockIdx.x;
  const SampleRow p = a.row[r];
  const int cols = a.cols;
  const float* row = a.logits + (a.first_row + r) * a.stride;
  float* w = a.weights + static_cast<int64_t>(r) * cols;
  wait_for_inputs();
  allow_next_kernel();
  if (p.inv_temperature == 0.0) {  // greedy
    const int idx = row_argmax(row, cols);
    if (threadIdx.x == 0) a.ids[a.first_row + r] = idx;
    return;
  }

  float max_logit = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += kThreads) max_logit = fmaxf(max_logit, row[c]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    max_logit = fmaxf(max_logit, __shfl_xor_sync(0xffffffffu, max_logit, offset));
  }
  if (threadIdx.x % 32 == 0) s.d[threadIdx.x / 32] = max_logit;
  __syncthreads();
  max_logit = -INFINITY;
  for (int i = 0; i < kThreads / 32; ++i) max_logit = fmaxf(max_logit, static_cast<float>(s.d[i]));
  __syncthreads();
  if (max_logit == -INFINITY) {
    if (threadIdx.x == 0) a.ids[a.first_row + r] = -1;
    return;
  }
  const float threshold =
      p.top_k > 0 && p.top_k < cols ? kth_largest(row, cols, p.top_k, s) : -INFINITY;

  // Unnormalised weights exp((l - max) / T) of the candidates; the largest is exp(0) = 1.
  double total = 0.0;
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float l = row[c];
    const bool candidate = l >= threshold && l > -INFINITY;
    const float e =
        candidate
            ? static_cast<float>(exp((static_cast<double>(l) - max_logit) * p.inv_temperature))
            : 0.0f;
    w[c] = e;
    total += e;
  }
  total = block_sum(total, s);

  // Nucleus and min-p: in probability order, keep while the mass before a token is below top_p
  // and its probability at least min_p times the largest. The last kept value v is the smallest
  // weight with (mass strictly above v) < top_p * total (binary search over float bits); of the
  // tokens tied at v, those with the lowest columns are kept while the running mass allows.
  float cut = 0.0f;   // weights > cut are kept
  float tie = -1.0f;  // weights == tie: the first tie_keep of them (by column) are kept
  int tie_keep = 0;
  if (p.top_p < 1.0) {
    const double limit = p.top_p * total;
    unsigned lo = 0, hi = __float_as_uint(1.0f);  // answer in (lo, hi]
    auto mass_above = [&](float v) {
      double m = 0.0;
      for (int c = threadIdx.x; c < cols; c += kThreads) m += w[c] > v ? w[c] : 0.0f;
      return block_sum(m, s);
    };
    if (mass_above(0.0f) < limit) hi = 0;
    while (lo + 1 < hi) {
      const unsigned mid = lo + (hi - lo) / 2;
      if (mass_above(__uint_as_float(mid)) < limit) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    const float v = __uint_as_float(hi);
    const double above = mass_above(v);
    int ties = 0;
    for (int c = threadIdx.x; c < cols; c += kThreads) ties += w[c] == v ? 1 : 0;
    ties = block_sum(ties, s);
    double running = above;
    while (tie_keep < ties && running < limit) running += v, ++tie_keep;
    cut = v;
    tie = v;
  }
  const float min_weight = static_cast<float>(p.min_p);  // times the largest weight, 1
  auto kept_in_order = [&](float e, int tie_rank) {
    if (e < min_weight || e == 0.0f) return false;
    return e > cut || (e == tie && tie_rank < tie_keep);
  };

  // Column-ordered pass: thread t owns columns [t * span, (t + 1) * span).
  const int span = (cols + kThreads - 1) / kThreads;
  const int begin = min(cols, static_cast<int>(threadIdx.x) * span), end = min(cols, begin + span);
  int my_ties = 0;
  for (int c = begin; c < end; ++c) my_ties += w[c] == tie ? 1 : 0;
  // Ties before this thread's columns (an inclusive prefix of counts, as doubles: exact).
  const int tie_base = static_cast<int>(block_prefix(static_cast<double>(my_ties), s)) - my_ties;
  double mine = 0.0;
  int rank = tie_base;
  for (int c = begin; c < end; ++c) {
    const float e = w[c];
    const bool keep = kept_in_order(e, rank);
    if (e == tie) ++rank;
    w[c] = keep ? e : 0.0f;
    mine += keep ? e : 0.0f;
  }
  const double through = block_prefix(mine, s);  // kept mass up to the end of my columns
  __syncthreads();
  if (threadIdx.x == kThreads - 1) s.d[0] = through;
  __syncthreads();
  const double target = p.u * s.d[0];
  double running = through - mine;
  int chosen = -1, last = -1;
  for (int c = begin; c < end; ++c) {
    if (w[c] == 0.0f) continue;
    running += w[c];
    last = c;
    if (running > target) {
      chosen = c;
      break;
    }
  }
  // The first crossing column; none (rounding at the very end): the last kept column.
  __syncthreads();
  if (threadIdx.x == 0) s.i[0] = INT_MAX, s.i[1] = -1;
  __syncthreads();
  if (chosen >= 0) atomicMin(&s.i[0], chosen);
  if (last >= 0) atomicMax(&s.i[1], last);
  __syncthreads();
  if (threadIdx.x == 0) a.ids[a.first_row + r] = s.i[0] != INT_MAX ? s.i[0] : s.i[1];
}

}  // namespace

void argmax_rows(const float* logits, int64_t stride, int64_t rows, int64_t cols, int32_t* ids,
                 cudaStream_t stream) {
  if (cols > INT_MAX - kThreads) fail_message("cuda argmax: a row longer than INT_MAX");
  Launch launch(dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, argmax_kernel, logits, stride, static_cast<int>(cols),
                           ids),
        "argmax_kernel");
}

void sample_rows(const SampleRowsArgs& args, cudaStream_t stream) {
  if (args.cols > INT_MAX - kThreads) fail_message("cuda sampling: a row longer than INT_MAX");
  Launch launch(dim3(static_cast<unsigned>(args.rows)), dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, sample_kernel, args), "sample_kernel");
}

}  // namespace specd::cuda
