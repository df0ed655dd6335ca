// LtGemm: the bf16 prefill GEMM through cuBLASLt, with one fixed algorithm per shape.
#include "backend/cuda/cublaslt_gemm.h"

#include <cublasLt.h>

#include <cstdint>
#include <string>

namespace specd::cuda {
namespace {

// cuBLAS asks for 32 MiB on Hopper (4 MiB before); allocated once, shared by every shape.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Split-K partial sums may only be reduced in a separate step, in a fixed order.
constexpr uint32_t kReductions = CUBLASLT_REDUCTION_SCHEME_NONE |
                                 CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                                 CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;

void check_lt(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail_message(std::string("cuBLASLt: ") + what + " failed: " + cublasLtGetStatusName(status) +
               " (" + cublasLtGetStatusString(status) +
               "); SPECD_CUBLASLT=0 runs specd's own GEMM");
}

// The largest power of two, at most 256, dividing both the address and the leading dimension in
// bytes: the alignment every column of the matrix keeps.
int alignment(uintptr_t address, int64_t ld_bytes) {
  const uintptr_t bits = address | static_cast<uintptr_t>(ld_bytes) | 256;
  return static_cast<int>(bits & (~bits + 1));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
              T value) {
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)),
           "cublasLtMatmulPreferenceSetAttribute");
}

}  // namespace

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (y != nullptr) cublasLtMatrixLayoutDestroy(y);
    if (x != nullptr) cublasLtMatrixLayoutDestroy(x);
    if (w != nullptr) cublasLtMatrixLayoutDestroy(w);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

LtGemm::LtGemm() {
  cublasLtHandle_t handle = nullptr;
  check_lt(cublasLtCreate(&handle), "cublasLtCreate");
  handle_ = handle;
  const cudaError_t status = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (status != cudaSuccess) {
    cublasLtDestroy(handle_);
    check(status, "cudaMalloc (cuBLASLt workspace)");
  }
  workspace_bytes_ = kWorkspaceBytes;
}

LtGemm::~LtGemm() {
  plans_.clear();
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

LtGemm::Key LtGemm::key_of(const MatmulArgs& a) {
  Key key;
  key.m = a.m;
  key.n = a.n;
  key.k = a.k;
  key.w_stride = a.w_stride;
  key.y_stride = a.y_stride;
  key.w_align = alignment(reinterpret_cast<uintptr_t>(a.w), a.w_stride * 2);
  key.y_align = alignment(reinterpret_cast<uintptr_t>(a.y), a.y_stride * 4);
  key.accumulate = a.accumulate;
  return key;
}

bool LtGemm::supports(const MatmulArgs& a) {
  return a.w_dtype == DType::kBF16 && a.m > 0 && a.n > 0 && a.k > 0 && plan(key_of(a)).found;
}

LtGemm::Plan& LtGemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  const int32_t trans_w = CUBLAS_OP_T, trans_x = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_w,
                                          sizeof(trans_w)),
           "cublasLtMatmulDescSetAttribute");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_x,
                                          sizeof(trans_x)),
           "cublasLtMatmulDescSetAttribute");
  // Column-major views of the row-major tensors: w [N, K] is K x N (used transposed), x [M, K]
  // is K x M, and y [M, N] is N x M, so y = op(w) · x.
  check_lt(cublasLtMatrixLayoutCreate(&p->w, CUDA_R_16BF, static_cast<uint64_t>(key.k),
                                      static_cast<uint64_t>(key.n), key.w_stride),
           "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&p->x, CUDA_R_16BF, static_cast<uint64_t>(key.k),
                                      static_cast<uint64_t>(key.m), key.k),
           "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&p->y, CUDA_R_32F, static_cast<uint64_t>(key.n),
                                      static_cast<uint64_t>(key.m), key.y_stride),
           "cublasLtMatrixLayoutCreate");

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{workspace_bytes_});
    set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, kReductions);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(key.w_align));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
             static_cast<uint32_t>(alignment(0, key.k * 2)));  // the 256-byte aligned bf16 copy
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(key.y_align));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(key.y_align));
    status = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->w, p->x, p->y, p->y, pref, 1,
                                            &result, &count);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) check_lt(status, "cublasLtMatmulAlgoGetHeuristic");
  p->found = status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (p->found) p->algo = result.algo;
  return *plans_.emplace(key, std::move(p)).first->second;
}

void LtGemm::matmul(const MatmulArgs& a, const void* x_bf16, cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(x_bf16) % 256 != 0) {
    fail_message("cuBLASLt GEMM: the bf16 copy of x is not 256-byte aligned");
  }
  const Plan& p = plan(key_of(a));
  if (!p.found) fail_message("cuBLASLt GEMM: no algorithm for this shape (check supports())");
  const float alpha = 1.0f, beta = a.accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(handle_, p.desc, &alpha, a.w, p.w, x_bf16, p.x, &beta, a.y, p.y, a.y, p.y,
                          &p.algo, workspace_, workspace_bytes_, stream),
           "cublasLtMatmul");
}

}  // namespace specd::cuda
