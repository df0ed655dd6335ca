// The prefill GEMM through cuBLASLt (built when CMake finds it): one algorithm per shape, fixed.
#pragma once

#include <cuda_runtime_api.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>

#include "backend/cuda/kernels.h"

struct cublasLtContext;

namespace specd::cuda {

// y = x · wᵀ (y += ... when accumulating) for bf16 weights, x already rounded to a bf16 copy; the
// bias is left to add_bias. Deterministic: the algorithm is picked once per shape, layout and
// alignment with cuBLASLt's heuristic, restricted to split-K reductions in a separate fixed-order
// step (none in the output buffer), and the workspace is allocated once.
class LtGemm {
 public:
  LtGemm();  // on the current device; throws with cuBLASLt's status on failure
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Whether cuBLASLt has an algorithm for this product (bf16 weights; answered once per shape).
  bool supports(const MatmulArgs& a);
  // Runs the product on `stream`; x_bf16 is [M, K] contiguous and 256-byte aligned. Requires
  // supports(a).
  void matmul(const MatmulArgs& a, const void* x_bf16, cudaStream_t stream);

 private:
  struct Key {
    int64_t m = 0, n = 0, k = 0, w_stride = 0, y_stride = 0;
    int w_align = 0, y_align = 0;
    bool accumulate = false;
    auto operator<=>(const Key&) const = default;
  };
  struct Plan;  // descriptors and the chosen algorithm (cublaslt_gemm.cc)

  static Key key_of(const MatmulArgs& a);
  Plan& plan(const Key& key);

  cublasLtContext* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace specd::cuda
