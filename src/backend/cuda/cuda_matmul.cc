// CudaBackend's matmuls: the small-M kernels (bf16 tensor cores, int8/int4 integer tensor cores,
// CUDA cores for GGUF blocks) for up to 16 rows, the GEMM (cuBLASLt or specd's own) above that,
// and the fused gate/up and gated down projections.
#include <algorithm>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#if SPECD_WITH_CUBLASLT
#include "backend/cuda/cublaslt_gemm.h"
#endif
#include "backend/op_checks.h"
#include "core/error.h"

namespace specd {

namespace {

// The small-M matmul of a group of int8/int4 or block-quantised weights (one dtype).
void matmul_quant_small(const cuda::MatmulGroup& group, cudaStream_t stream) {
  if (cuda::int_quant_dtype(group.part[0].w_dtype)) {
    cuda::matmul_int_small(group, stream);
  } else {
    cuda::matmul_block_small(group, stream);
  }
}

}  // namespace

void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                         bool accumulate) {
  const MatmulPart part{&w, bias, &y};
  run_matmuls(x, std::span<const MatmulPart>(&part, 1), accumulate);
}

void CudaBackend::matmul_group(const Tensor& x, std::span<const MatmulPart> parts) {
  SPECD_CHECK(!parts.empty() && parts.size() <= cuda::MatmulGroup::kMaxParts,
              "matmul_group: {} parts (1 to {})", parts.size(), cuda::MatmulGroup::kMaxParts);
  run_matmuls(x, parts, false);
}

cuda::MatmulGroup CudaBackend::make_group(const Tensor& x, std::span<const MatmulPart> parts,
                                          bool accumulate) const {
  cuda::MatmulGroup group;
  for (const MatmulPart& p : parts) {
    check_device("matmul", index_, {&x, p.w, p.y});
    if (p.bias != nullptr) check_device("matmul", index_, {p.bias});
    op_checks::matmul(x, *p.w, p.bias, *p.y);
    SPECD_CHECK(supports_weights(p.w->dtype), "cuda matmul: {} weights have no CUDA kernel yet",
                dtype_name(p.w->dtype));
    cuda::MatmulArgs& a = group.part[group.count];
    a.x = x.ptr<const float>();
    a.x_stride = x.stride;
    a.w = p.w->data;
    a.w_dtype = p.w->dtype;
    a.w_stride = p.w->stride;
    a.bias = p.bias != nullptr ? p.bias->data : nullptr;
    a.bias_dtype = p.bias != nullptr ? p.bias->dtype : DType::kF32;
    a.y = p.y->ptr<float>();
    a.y_stride = p.y->stride;
    a.m = x.rows;
    a.n = p.w->rows;
    a.k = p.w->cols;
    a.accumulate = accumulate;
    const int64_t before = group.count == 0 ? 0 : group.tile_end[group.count - 1];
    group.tile_end[group.count] = before + (a.n + 15) / 16;
    ++group.count;
  }
  return group;
}

void CudaBackend::run_matmuls(const Tensor& x, std::span<const MatmulPart> parts, bool accumulate) {
  const cuda::MatmulGroup group = make_group(x, parts, accumulate);
  const int64_t m = x.rows;
  if (m > kSmallBatch) int_x_ready_ = {};
  if (m == 0) return;
  bool same_weights = true;  // one launch needs one weight dtype
  for (int p = 1; p < group.count; ++p) {
    same_weights = same_weights && group.part[p].w_dtype == group.part[0].w_dtype;
  }
  if (m <= kSmallBatch && same_weights) {
    run_small(group);
    return;
  }
  const void* x_bf16 = nullptr;  // x rounded to bf16 once for the group's GEMMs
  for (int p = 0; p < group.count; ++p) {
    const cuda::MatmulArgs& a = group.part[p];
    if (a.n == 0) continue;
    if (m > kSmallBatch && cuda::quant_kernel_dtype(a.w_dtype)) {
      const size_t slab = static_cast<size_t>(std::min(cuda::dequant_slab_rows(a.k), a.n) * a.k);
      void* w_bf16 = scratch(kDequant, slab * 2);
      cuda::matmul_quant_gemm(a, w_bf16, stream_,
                              [&](const cuda::MatmulArgs& part) { run_gemm(part, &x_bf16); });
      continue;
    }
    if (m > kSmallBatch && cuda::gemm_supported(a)) {
      run_gemm(a, &x_bf16);
      continue;
    }
    cuda::MatmulGroup single;
    single.part[0] = a;
    single.tile_end[0] = (a.n + 15) / 16;
    single.count = 1;
    run_small(single);
  }
}

bool CudaBackend::gate_up_act(Activation act, const Tensor& x, const Tensor& w_gate,
                              const Tensor& w_up, Tensor& gate) {
  // bf16 with few rows: the small-M kernel multiplies 8 gate rows and the 8 matching up rows in
  // one tile and writes act(gate) * up as the tile finishes, which saves the silu_mul kernel.
  const cuda::MatmulGroup pair = gate_up_pair(act, x, w_gate, w_up, gate);
  if (pair.count == 0) return false;
  run_small(pair);
  return true;
}

cuda::MatmulGroup CudaBackend::gate_up_pair(Activation act, const Tensor& x, const Tensor& w_gate,
                                            const Tensor& w_up, Tensor& gate) const {
  if (!fuse_gate_ || x.rows == 0 || x.rows > kSmallBatch) return {};
  const MatmulPart parts[] = {{&w_gate, nullptr, &gate}, {&w_up, nullptr, &gate}};
  const cuda::MatmulGroup separate = make_group(x, parts, false);
  return cuda::gate_up_pair_group(act, separate.part[0], separate.part[1]);
}

void CudaBackend::gated_matmul(Activation act, Tensor& gate, const Tensor& up, const Tensor& w,
                               const Tensor* bias, Tensor& y, bool accumulate) {
  // int8/int4 with few rows on tensor cores: x is quantised first anyway, and that kernel reads
  // act(gate) * up itself, which saves the silu_mul kernel. (bf16: combining them inside the
  // matmul's x loads, once per tile, made H100 decode 28% slower; not done.)
  const cuda::MatmulGroup group = gated_int_group(act, gate, up, w, bias, y, accumulate);
  if (group.count > 0) {
    run_small(group);
    return;
  }
  Backend::gated_matmul(act, gate, up, w, bias, y, accumulate);
}

cuda::MatmulGroup CudaBackend::gated_int_group(Activation act, Tensor& gate, const Tensor& up,
                                               const Tensor& w, const Tensor* bias, Tensor& y,
                                               bool accumulate) const {
  if (!fuse_gate_ || !cuda::int_quant_dtype(w.dtype) || up.rows == 0 || up.rows > kSmallBatch) {
    return {};
  }
  check_device("gated_matmul", index_, {&gate});
  op_checks::silu_mul(gate, up, gate);  // the shapes (gelu_tanh_mul's are the same)
  const MatmulPart part{&w, bias, &y};
  cuda::MatmulGroup group = make_group(up, std::span<const MatmulPart>(&part, 1), accumulate);
  cuda::MatmulArgs& a = group.part[0];
  a.gate = gate.ptr<const float>();
  a.gate_stride = gate.stride;
  a.gate_act = act;
  if (!cuda::small_gate_fusable(a) || !int_tensor_cores(group)) return {};
  return group;
}

void CudaBackend::run_gemm(const cuda::MatmulArgs& a, const void** x_bf16) {
  cuda::MatmulScratch s;
  s.x_bf16_elems = static_cast<size_t>(a.m * a.k);
  s.x_bf16 = scratch(kBf16X, s.x_bf16_elems * 2);
#if SPECD_WITH_CUBLASLT
  if (lt_ != nullptr && lt_->supports(a)) {
    if (*x_bf16 == nullptr) {
      cuda::round_x_bf16(a, s, stream_);
      *x_bf16 = s.x_bf16;
    }
    lt_->matmul(a, *x_bf16, stream_);
    cuda::add_bias(a, stream_);
    return;
  }
#endif
  cuda::matmul_gemm(a, s, stream_);  // rounds x itself, as it always has
}

bool CudaBackend::int_tensor_cores(const cuda::MatmulGroup& group) const {
  if (!int_mma_ || !cuda::int_quant_dtype(group.part[0].w_dtype)) return false;
  for (int p = 0; p < group.count; ++p) {
    if (!cuda::small_tensor_cores(group.part[p])) return false;
  }
  return true;
}

bool CudaBackend::small_tensor_core_group(const cuda::MatmulGroup& group) const {
  if (group.count == 0) return false;
  const cuda::MatmulArgs& a = group.part[0];
  if (a.m == 0 || a.m > kSmallBatch) return false;
  for (int p = 0; p < group.count; ++p) {
    const cuda::MatmulArgs& part = group.part[p];
    if (part.w_dtype != a.w_dtype || !cuda::small_tensor_cores(part)) return false;
  }
  return a.w_dtype == DType::kBF16 || int_tensor_cores(group);
}

void CudaBackend::run_small(const cuda::MatmulGroup& group) {
  const IntXReady ready = std::exchange(int_x_ready_, {});  // valid for this matmul only
  if (cuda::quant_kernel_dtype(group.part[0].w_dtype) && !int_tensor_cores(group)) {
    matmul_quant_small(group, stream_);  // GGUF blocks; int8/int4 on CUDA cores
    return;
  }
  cuda::SmallMatmulPlan plan = cuda::plan_small_matmul(group, multiprocessors_);
  if (plan.tiles == 0) return;
  plan.stacked_x = stacked_x_;
  cuda::MatmulScratch s;
  s.partial_floats = cuda::small_matmul_partial_floats(plan);
  if (s.partial_floats > 0) {
    s.partials = static_cast<float*>(scratch(kPartials, s.partial_floats * 4));
    s.tickets = static_cast<unsigned*>(scratch(kTickets, static_cast<size_t>(plan.tiles) * 4));
  }
  const cuda::MatmulArgs& a = group.part[0];
  if (cuda::int_quant_dtype(a.w_dtype)) {
    s.x_int8 = scratch(kIntX, cuda::small_int_x_bytes(a.m, a.k));
    s.x_int8_ready = group.count == 1 && a.gate == nullptr && ready.x == a.x && ready.w == a.w &&
                     ready.m == a.m && ready.k == a.k;
  }
  cuda::matmul_small(group, plan, s, stream_);
}

}  // namespace specd
