// A folded RMSNorm's two kernels outside the matmuls (Backend's FoldedNorm): writing the folded
// form of rows no matmul wrote (the first layer's input), and turning the folded form back into
// the normalised rows for a matmul that cannot scale its products.
#include "backend/cuda/kernels.h"
#include "backend/cuda/small_mma.cuh"

namespace specd::cuda {
namespace {

constexpr int kTile = small_mma::kTileN;

// One block per row, one thread per 16-column tile at a time: scaled = r ⊙ weight, and the
// tile's sum of squares (in column order).
__global__ void __launch_bounds__(256)
    fold_norm_kernel(const float* r, int64_t r_stride, int64_t cols, NormOut out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t row = blockIdx.x, tiles = (cols + kTile - 1) / kTile;
  for (int64_t j = threadIdx.x; j < tiles; j += blockDim.x) {
    float sq = 0.0f;
    const int64_t end = (j + 1) * kTile < cols ? (j + 1) * kTile : cols;
    for (int64_t c = j * kTile; c < end; ++c) {
      const float v = r[row * r_stride + c];
      sq += v * v;
      out.scaled[row * out.scaled_stride + c] = v * load_f32(out.weight, out.weight_dtype, c);
    }
    out.sums[row * out.sums_stride + j] = sq;
  }
}

// One block per row: its inverse RMS (the matmul epilogue's function, in its first half-warp),
// then scaled *= it.
__global__ void __launch_bounds__(256)
    unfold_norm_kernel(float* scaled, int64_t stride, int64_t cols, NormIn in) {
  __shared__ float inv;
  wait_for_inputs();
  allow_next_kernel();
  const int64_t row = blockIdx.x;
  if (threadIdx.x < 32) {
    // Lanes 16..31 stand in for a row past the last one: they load nothing.
    const int lane = static_cast<int>(threadIdx.x);
    const int as_row = static_cast<int>(row) + (lane < 16 ? 0 : 1);
    const float v = small_mma::folded_inv_rms(in, row + 1, as_row, lane % 16);
    if (lane == 0) inv = v;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) scaled[row * stride + c] *= inv;
}

}  // namespace

void fold_norm(const float* r, int64_t r_stride, int64_t rows, int64_t cols, const NormOut& out,
               cudaStream_t stream) {
  Launch launch(dim3(static_cast<unsigned>(rows)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, fold_norm_kernel, r, r_stride, cols, out),
        "fold_norm_kernel");
}

void unfold_norm(float* scaled, int64_t stride, int64_t rows, int64_t cols, const NormIn& in,
                 cudaStream_t stream) {
  Launch launch(dim3(static_cast<unsigned>(rows)), dim3(256), 0, stream);
  check(cudaLaunchKernelEx(&launch.config, unfold_norm_kernel, scaled, stride, cols, in),
        "unfold_norm_kernel");
}

}  // namespace specd::cuda
