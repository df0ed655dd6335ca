// Device-side token choice: the argmax of each logits row (greedy decoding and verification),
// and sampling (temperature, top-k, top-p, min-p, then an inverse-CDF draw) as the host's
// Sampler does it, so that sampled requests copy one token id per row instead of the row.
#include <algorithm>
#include <cfloat>
#include <climits>

#include "backend/cuda/device.cuh"
#include "backend/cuda/row_slices.cuh"

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

// A column of the best logit seen so far (by `better`).
struct Best {
  float v;
  int idx;  // INT_MAX: nothing seen
};

__device__ __forceinline__ void take(Best& best, float v, int idx) {
  if (idx != INT_MAX && (best.idx == INT_MAX || better(v, idx, best.v, best.idx))) {
    best = {v, idx};
  }
}

// The block's best (kBlock threads); every thread gets it.
template <int kBlock>
__device__ Best block_best(Best best) {
  __shared__ Best warp_best[kBlock / 32];
  __shared__ Best result;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    take(best, __shfl_xor_sync(~0u, best.v, offset), __shfl_xor_sync(~0u, best.idx, offset));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();
  if (warp == 0) {
    best = lane < kBlock / 32 ? warp_best[lane] : Best{0.0f, INT_MAX};
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      take(best, __shfl_xor_sync(~0u, best.v, offset), __shfl_xor_sync(~0u, best.idx, offset));
    }
    if (lane == 0) result = best;
  }
  __syncthreads();
  return result;
}

// The argmax of one row over the block: strided per-thread scans, then the block's best. Every
// thread gets the column.
__device__ int row_argmax(const float* row, int cols) {
  Best best{0.0f, INT_MAX};
#pragma unroll 4
  for (int c = threadIdx.x; c < cols; c += kThreads) take(best, row[c], c);
  return block_best<kThreads>(best).idx;
}

// Rows of up to row_slices::kOneBlockCols columns: one block per row.
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* logits, int64_t stride, int cols, int32_t* ids) {
  wait_for_inputs();
  allow_next_kernel();
  const int idx = row_argmax(logits + blockIdx.x * stride, cols);
  if (threadIdx.x == 0) ids[blockIdx.x] = idx;
}

// Longer rows in slices of row_slices::kCols columns, one block each (a single block took about
// 25 us for a 128k vocabulary on an H200, bound by one multiprocessor's loads): block (slice,
// row) writes its slice's best (value, column) to `partials`, and the row's last block to finish
// picks among the slices' winners. `better` is a strict total order, so the column is the one a
// single scan finds.
__global__ void __launch_bounds__(row_slices::kThreads)
    argmax_slices_kernel(const float* logits, int64_t stride, int cols, int32_t* ids,
                         Best* partials, unsigned* tickets) {
  // Not this file's kThreads (one block a row): a slice's block has row_slices::kThreads.
  constexpr int kSliceThreads = row_slices::kThreads, kPerThread = row_slices::kPerThread;
  const int slice = blockIdx.x, slices = gridDim.x;
  const int64_t r = blockIdx.y;
  wait_for_inputs();
  allow_next_kernel();
  float v[kPerThread];
  row_slices::load(logits + r * stride, slice, cols, 0.0f, v);
  Best best{0.0f, INT_MAX};
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = row_slices::column(slice, i);
    if (c < cols) take(best, v[i], c);
  }
  best = block_best<kSliceThreads>(best);
  if (threadIdx.x == 0) partials[r * slices + slice] = best;
  if (!row_slices::last_block(&tickets[r], slices)) return;
  Best mine{0.0f, INT_MAX};
  for (int s = threadIdx.x; s < slices; s += kSliceThreads) {
    const Best other = {__ldcg(&partials[r * slices + s].v), __ldcg(&partials[r * slices + s].idx)};
    take(mine, other.v, other.idx);
  }
  mine = block_best<kSliceThreads>(mine);
  if (threadIdx.x == 0) ids[r] = mine.idx;
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

// The columns a thread owns in the column-ordered passes: [t * span, (t + 1) * span).
struct Columns {
  int begin, end;
  __device__ explicit Columns(int cols) {
    const int span = (cols + kThreads - 1) / kThreads;
    begin = min(cols, static_cast<int>(threadIdx.x) * span);
    end = min(cols, begin + span);
  }
};

// The distribution of Sampler::distribution for one row: w[c] = the kept weight of column c
// (exp of the scaled logit relative to the largest, 0 for columns cut by top-k, top-p or min-p);
// returns the kept total, 0 when no logit is finite. `mine` = the kept weight of this thread's
// columns. Top-p and min-p work in probability order with ties by column: the last kept value v
// is the smallest weight with (mass strictly above v) < top_p * total (binary search over float
// bits); of the tokens tied at v, those with the lowest columns are kept while the mass allows.
__device__ double kept_weights(const float* row, int cols, const SampleRow& p, float* w,
                               const Columns& own, double& mine, BlockScratch& s) {
  float max_logit = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += kThreads) max_logit = fmaxf(max_logit, row[c]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    max_logit = fmaxf(max_logit, __shfl_xor_sync(0xffffffffu, max_logit, offset));
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) s.d[threadIdx.x / 32] = max_logit;
  __syncthreads();
  max_logit = -INFINITY;
  for (int i = 0; i < kThreads / 32; ++i) max_logit = fmaxf(max_logit, static_cast<float>(s.d[i]));
  __syncthreads();
  mine = 0.0;
  if (max_logit == -INFINITY) return 0.0;
  const float threshold =
      p.top_k > 0 && p.top_k < cols ? kth_largest(row, cols, p.top_k, s) : -INFINITY;

  double total = 0.0;  // the largest weight is exp(0) = 1
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float l = row[c];
    const bool candidate = l >= threshold && l > -INFINITY;
    w[c] = candidate
               ? static_cast<float>(exp((static_cast<double>(l) - max_logit) * p.inv_temperature))
               : 0.0f;
    total += w[c];
  }
  total = block_sum(total, s);

  float cut = 0.0f;   // weights > cut are kept
  float tie = -1.0f;  // weights == tie: the first tie_keep of them (by column) are kept
  int tie_keep = 0;
  if (p.top_p < 1.0) {
    const double limit = p.top_p * total;
    auto mass_above = [&](float v) {
      double m = 0.0;
      for (int c = threadIdx.x; c < cols; c += kThreads) m += w[c] > v ? w[c] : 0.0f;
      return block_sum(m, s);
    };
    unsigned lo = 0, hi = __float_as_uint(1.0f);  // mass_above(hi) < limit <= mass_above(lo)
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
    double running = mass_above(v);
    int ties = 0;
    for (int c = threadIdx.x; c < cols; c += kThreads) ties += w[c] == v ? 1 : 0;
    ties = block_sum(ties, s);
    while (tie_keep < ties && running < limit) running += v, ++tie_keep;
    cut = v;
    tie = v;
  }
  const float min_weight = static_cast<float>(p.min_p);  // times the largest weight, 1

  // Column order: ties ranked by column, then each thread keeps or zeroes its own columns.
  int my_ties = 0;
  for (int c = own.begin; c < own.end; ++c) my_ties += w[c] == tie ? 1 : 0;
  int rank = static_cast<int>(block_prefix(static_cast<double>(my_ties), s)) - my_ties;
  for (int c = own.begin; c < own.end; ++c) {
    const float e = w[c];
    const bool keep = e > 0.0f && e >= min_weight && (e > cut || (e == tie && rank < tie_keep));
    if (e == tie) ++rank;
    w[c] = keep ? e : 0.0f;
    mine += keep ? e : 0.0f;
  }
  const double kept = block_sum(mine, s);
  return kept;
}

// The first column (in column order over w, this thread's own columns summing to `mine`) whose
// running sum passes `target`; the last positive column when rounding leaves none.
__device__ int draw_column(const float* w, const Columns& own, double mine, double target,
                           BlockScratch& s) {
  double running = block_prefix(mine, s) - mine;
  int chosen = -1, last = -1;
  for (int c = own.begin; c < own.end; ++c) {
    if (w[c] == 0.0f) continue;
    running += w[c];
    last = c;
    if (running > target) {
      chosen = c;
      break;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) s.i[0] = INT_MAX, s.i[1] = -1;
  __syncthreads();
  if (chosen >= 0) atomicMin(&s.i[0], chosen);
  if (last >= 0) atomicMax(&s.i[1], last);
  __syncthreads();
  const int column = s.i[0] != INT_MAX ? s.i[0] : s.i[1];
  __syncthreads();
  return column;
}

// Row blockIdx.x: the argmax when greedy, else the inverse-CDF draw with u from the kept
// weights; -1 when no logit is finite. With `probs`, also the normalised distribution.
__global__ void __launch_bounds__(kThreads) sample_kernel(SampleRowsArgs a) {
  __shared__ BlockScratch s;
  const int r = blockIdx.x;
  const SampleRow p = a.row[r];
  if (p.sliced) return;  // drawn by sample_rows_sliced
  const float* row = a.logits + (a.first_row + r) * a.stride;
  float* w = a.weights + static_cast<int64_t>(r) * a.cols;
  wait_for_inputs();
  allow_next_kernel();
  int32_t token;
  if (p.inv_temperature == 0.0) {
    token = row_argmax(row, a.cols);
  } else {
    const Columns own(a.cols);
    double mine;
    const double total = kept_weights(row, a.cols, p, w, own, mine, s);
    if (a.probs != nullptr) {
      float* q = a.probs + (a.first_row + r) * a.probs_stride;
      for (int c = own.begin; c < own.end; ++c) q[c] = static_cast<float>(w[c] / total);
    }
    token = total > 0.0 ? draw_column(w, own, mine, p.u * total, s) : -1;
  }
  if (threadIdx.x == 0) a.ids[a.first_row + r] = token;
}

// Row i < k checks draft token x_i drawn from q_i (Verifier::verify's rule): x_i when
// u_accept * q_i(x_i) < p_i(x_i), else a draw with u_resample from norm(max(0, p_i - q_i)), or
// from p_i when that is empty; row k draws from p_k with its u.
__global__ void __launch_bounds__(kThreads) verify_sampled_kernel(VerifySampledArgs a) {
  __shared__ BlockScratch s;
  const int r = blockIdx.x, k = a.rows - 1;
  const float* row = a.logits + r * a.stride;
  float* w = a.weights + static_cast<int64_t>(r) * a.cols;
  wait_for_inputs();
  allow_next_kernel();
  const Columns own(a.cols);
  double mine;
  const double total = kept_weights(row, a.cols, a.sampling, w, own, mine, s);
  int32_t token = -1;
  if (total > 0.0 && r == k) {
    token = draw_column(w, own, mine, a.u_sample * total, s);
  } else if (total > 0.0 && (a.device_draft == nullptr ||
                             (a.device_draft[r] >= 0 && a.device_draft[r] < a.cols))) {
    const float* q = a.q + r * a.q_stride;
    const int x = a.device_draft != nullptr ? a.device_draft[r] : a.draft[r];
    __syncthreads();  // w[x] may be another thread's column
    const float p_x = static_cast<float>(w[x] / total), q_x = q[x];
    if (q_x > 0.0f && a.u_accept[r] * q_x < p_x) {
      token = x;
    } else {
      double residual = 0.0;
      __syncthreads();  // every thread has read w[x]
      for (int c = own.begin; c < own.end; ++c) {
        w[c] = fmaxf(0.0f, static_cast<float>(w[c] / total) - q[c]);
        residual += w[c];
      }
      const double mass = block_sum(residual, s);
      if (mass > 0.0) {
        token = draw_column(w, own, residual, a.u_resample[r] * mass, s);
      } else {  // p == q up to rounding: a draw from p is exact
        const double again = kept_weights(row, a.cols, a.sampling, w, own, mine, s);
        token = draw_column(w, own, mine, a.u_resample[r] * again, s);
      }
    }
  }
  if (threadIdx.x == 0) a.ids[r] = token;
}

}  // namespace

// The scratch: tickets for kTicketRows rows at its start (a fixed place, so that they stay zero
// whatever row counts come), then the slices' winners. More rows run in launches of that many.
constexpr int64_t kTicketRows = 1024;

size_t argmax_scratch_bytes(int64_t rows, int64_t cols) {
  return kTicketRows * sizeof(unsigned) +
         std::min(rows, kTicketRows) * row_slices::slices(cols) * sizeof(Best);
}

void argmax_rows(const float* logits, int64_t stride, int64_t rows, int64_t cols, int32_t* ids,
                 void* scratch, cudaStream_t stream) {
  if (cols > INT_MAX - row_slices::kCols) fail_message("cuda argmax: a row longer than INT_MAX");
  if (cols <= row_slices::kOneBlockCols) {
    Launch launch(dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, stream);
    check(cudaLaunchKernelEx(&launch.config, argmax_kernel, logits, stride, static_cast<int>(cols),
                             ids),
          "argmax_kernel");
    return;
  }
  const int64_t slices = row_slices::slices(cols);
  auto* tickets = static_cast<unsigned*>(scratch);
  auto* partials = reinterpret_cast<Best*>(tickets + kTicketRows);
  for (int64_t first = 0; first < rows; first += kTicketRows) {
    const int64_t n = std::min(kTicketRows, rows - first);
    Launch launch(dim3(static_cast<unsigned>(slices), static_cast<unsigned>(n)),
                  dim3(row_slices::kThreads), 0, stream);
    check(cudaLaunchKernelEx(&launch.config, argmax_slices_kernel, logits + first * stride, stride,
                             static_cast<int>(cols), ids + first, partials, tickets),
          "argmax_slices_kernel");
  }
}

void sample_rows(const SampleRowsArgs& args, void* slice_scratch, cudaStream_t stream) {
  if (args.cols > INT_MAX - kThreads) fail_message("cuda sampling: a row longer than INT_MAX");
  SampleRowsArgs a = args;
  int sliced = 0;
  for (int r = 0; r < a.rows; ++r) {
    a.row[r].sliced = sample_row_sliced(a.row[r], a.cols, a.probs != nullptr);
    sliced += a.row[r].sliced ? 1 : 0;
  }
  if (sliced > 0) sample_rows_sliced(a, slice_scratch, stream);
  if (sliced == a.rows) return;
  Launch launch(dim3(static_cast<unsigned>(a.rows)), dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, sample_kernel, a), "sample_kernel");
}

void verify_sampled(const VerifySampledArgs& args, cudaStream_t stream) {
  if (args.cols > INT_MAX - kThreads) fail_message("cuda sampling: a row longer than INT_MAX");
  Launch launch(dim3(static_cast<unsigned>(args.rows)), dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, verify_sampled_kernel, args), "verify_sampled_kernel");
}

}  // namespace specd::cuda
