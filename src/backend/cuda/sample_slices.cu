// Sampled rows with a temperature only (no top-k, top-p or min-p, no distribution written out)
// over many blocks: a row in slices of kSliceCols columns, one block each, in two launches. The
// first finds the row's largest logit; the second writes each column's weight exp((l - max) / T)
// (as the one-block kernel does), sums each slice, and the row's last block to finish draws: the
// first column in column order whose running sum passes u times the total. One block a row took
// about 0.2 ms a sampled decode step with a 128k vocabulary (H200), bound by one multiprocessor.
#include <climits>

#include "backend/cuda/device.cuh"
#include "backend/cuda/row_slices.cuh"

namespace specd::cuda {
namespace {

using row_slices::kPerThread;
using row_slices::kThreads;
constexpr int kSliceCols = row_slices::kCols;
constexpr int kMaxRows = SampleRowsArgs::kMaxRows;

// The scratch: two tickets per row (one per launch, zero between launches) at its start, where
// they stay whatever the row length, then per (row, slice) the slice's sum of weights and its
// largest logit, and each row's largest logit.
struct SliceScratch {
  unsigned* tickets;  // [2, kMaxRows]
  double* slice_sum;  // [kMaxRows, slices]
  float* slice_max;   // [kMaxRows, slices]
  float* row_max;     // [kMaxRows]
};
SliceScratch slice_scratch(void* base, int slices) {
  auto* tickets = static_cast<unsigned*>(base);
  auto* sums = reinterpret_cast<double*>(tickets + 2 * kMaxRows);  // 128 bytes in: aligned
  auto* maxes = reinterpret_cast<float*>(sums + kMaxRows * slices);
  return {tickets, sums, maxes, maxes + kMaxRows * slices};
}

struct SliceArgs {
  const float* logits;  // row j: logits + row[j] * stride
  int64_t stride;
  int cols, slices;
  float* weights;  // [kMaxRows, cols]
  int32_t* ids;    // ids[row[j]]
  int row[kMaxRows];
  double inv_temperature[kMaxRows], u[kMaxRows];
  SliceScratch s;
};

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op) {  // a fixed tree: lanes, then warps in order
  __shared__ T warps[kThreads / 32];
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(~0u, v, offset));
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  T total = warps[0];
  for (int w = 1; w < kThreads / 32; ++w) total = op(total, warps[w]);
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kThreads) slice_max_kernel(SliceArgs a) {
  const int slice = blockIdx.x, j = blockIdx.y;
  const float* row = a.logits + a.row[j] * a.stride;
  wait_for_inputs();
  allow_next_kernel();
  float v[kPerThread];
  row_slices::load(row, slice, a.cols, -INFINITY, v);
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) mx = fmaxf(mx, v[i]);
  mx = block_reduce(mx, [](float x, float y) { return fmaxf(x, y); });
  if (threadIdx.x == 0) a.s.slice_max[j * a.slices + slice] = mx;
  if (!row_slices::last_block(&a.s.tickets[j], a.slices) || threadIdx.x != 0) return;
  float row_max = -INFINITY;
  for (int s = 0; s < a.slices; ++s)
    row_max = fmaxf(row_max, __ldcg(&a.s.slice_max[j * a.slices + s]));
  a.s.row_max[j] = row_max;
}

// The first column of slice `slice` (columns in order, thread t owning kPerThread of them) whose
// running sum, from `before`, passes `target`; else its last positive column, or -1.
__device__ int draw_in_slice(const float* w, int cols, int slice, double before, double target) {
  const int first = slice * kSliceCols + static_cast<int>(threadIdx.x) * kPerThread;
  float mine[kPerThread];
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    mine[i] = first + i < cols ? __ldcg(&w[first + i]) : 0.0f;
    sum += mine[i];
  }
  // The sum of the threads before this one (lanes by a shuffle scan, then warps in order).
  __shared__ double warp_sums[kThreads / 32];
  __shared__ int chosen, last;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double inclusive = sum;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const double o = __shfl_up_sync(~0u, inclusive, offset);
    if (lane >= offset) inclusive += o;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  if (threadIdx.x == 0) {
    chosen = INT_MAX;
    last = -1;
  }
  __syncthreads();
  double running = before;
  for (int w = 0; w < warp; ++w) running += warp_sums[w];
  running += inclusive - sum;
  int pick = -1, positive = -1;
  for (int i = 0; i < kPerThread; ++i) {
    if (mine[i] == 0.0f) continue;
    running += mine[i];
    positive = first + i;
    if (running > target) {
      pick = first + i;
      break;
    }
  }
  if (pick >= 0) atomicMin(&chosen, pick);
  if (positive >= 0) atomicMax(&last, positive);
  __syncthreads();
  return chosen != INT_MAX ? chosen : last;
}

__global__ void __launch_bounds__(kThreads) slice_draw_kernel(SliceArgs a) {
  const int slice = blockIdx.x, j = blockIdx.y;
  const float* row = a.logits + a.row[j] * a.stride;
  float* w = a.weights + static_cast<int64_t>(j) * a.cols;
  wait_for_inputs();
  allow_next_kernel();
  const float max_logit = a.s.row_max[j];
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = row_slices::column(slice, i);
    if (c >= a.cols) continue;
    const float l = row[c];
    const float e =
        l > -INFINITY && max_logit > -INFINITY
            ? static_cast<float>(exp((static_cast<double>(l) - max_logit) * a.inv_temperature[j]))
            : 0.0f;
    w[c] = e;
    sum += e;
  }
  sum = block_reduce(sum, [](double x, double y) { return x + y; });
  if (threadIdx.x == 0) a.s.slice_sum[j * a.slices + slice] = sum;
  if (!row_slices::last_block(&a.s.tickets[kMaxRows + j], a.slices)) return;
  // The slices' sums in order; the slice where the running sum passes the target (else the
  // last positive one: rounding), and the sum before it. No slice: no finite logit.
  __shared__ int chosen_slice;
  __shared__ double before, target;
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int s = 0; s < a.slices; ++s) total += __ldcg(&a.s.slice_sum[j * a.slices + s]);
    target = a.u[j] * total;
    chosen_slice = -1;
    double running = 0.0;
    for (int s = 0; s < a.slices && total > 0.0; ++s) {
      const double part = __ldcg(&a.s.slice_sum[j * a.slices + s]);
      if (part <= 0.0) continue;
      chosen_slice = s;
      before = running;
      running += part;
      if (running > target) break;
    }
  }
  __syncthreads();
  const int token = chosen_slice >= 0 ? draw_in_slice(w, a.cols, chosen_slice, before, target) : -1;
  if (threadIdx.x == 0) a.ids[a.row[j]] = token;
}

}  // namespace

bool sample_row_sliced(const SampleRow& p, int cols, bool writes_probs) {
  return !writes_probs && cols > row_slices::kOneBlockCols && p.inv_temperature > 0.0 &&
         (p.top_k <= 0 || p.top_k >= cols) && p.top_p >= 1.0 && p.min_p <= 0.0;
}

size_t sample_slices_scratch_bytes(int64_t cols) {
  const int64_t slices = row_slices::slices(cols);
  return kMaxRows * slices * sizeof(double) + kMaxRows * (slices + 1) * sizeof(float) +
         2 * kMaxRows * sizeof(unsigned);
}

void sample_rows_sliced(const SampleRowsArgs& args, void* scratch, cudaStream_t stream) {
  SliceArgs a{};
  a.logits = args.logits + args.first_row * args.stride;
  a.stride = args.stride;
  a.cols = args.cols;
  a.slices = static_cast<int>(row_slices::slices(args.cols));
  a.weights = args.weights;
  a.ids = args.ids + args.first_row;
  a.s = slice_scratch(scratch, a.slices);
  int n = 0;
  for (int r = 0; r < args.rows; ++r) {
    if (!args.row[r].sliced) continue;
    a.row[n] = r;
    a.inv_temperature[n] = args.row[r].inv_temperature;
    a.u[n] = args.row[r].u;
    ++n;
  }
  if (n == 0) return;
  const dim3 grid(static_cast<unsigned>(a.slices), static_cast<unsigned>(n));
  Launch max_launch(grid, dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&max_launch.config, slice_max_kernel, a), "slice_max_kernel");
  Launch draw_launch(grid, dim3(kThreads), 0, stream);
  check(cudaLaunchKernelEx(&draw_launch.config, slice_draw_kernel, a), "slice_draw_kernel");
}

}  // namespace specd::cuda
