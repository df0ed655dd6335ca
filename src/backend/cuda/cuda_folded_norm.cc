// Folded RMSNorms on the CUDA device (Backend's FoldedNorm): for up to 16 rows, the tensor-core
// matmul that updates the residual stream r also writes r ⊙ weight and per-tile sums of r², and
// the matmuls reading those scale each product row by the inverse RMS in their tile epilogue, so
// that no norm kernel runs between them.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specd {

namespace {

cuda::NormOut norm_out(const FoldedNorm& n) {
  return {n.scaled->ptr<float>(), n.scaled->stride,     n.weight->data,
          n.weight->dtype,        n.sums->ptr<float>(), n.sums->stride};
}

}  // namespace

cuda::NormIn CudaBackend::norm_in(const FoldedNorm& n) {
  return {n.sums->ptr<const float>(), n.sums->stride, n.sums->cols,
          static_cast<float>(n.scaled->cols), n.eps};
}

void CudaBackend::check_folded(const char* op, int64_t rows, int64_t cols,
                               const FoldedNorm& norm) const {
  SPECD_CHECK(norm.weight != nullptr && norm.scaled != nullptr && norm.sums != nullptr,
              "{}: the folded norm lacks its weight, scaled rows or sums", op);
  check_device(op, index_, {norm.weight, norm.scaled, norm.sums});
  const Tensor &scaled = *norm.scaled, &sums = *norm.sums;
  SPECD_CHECK(scaled.dtype == DType::kF32 && scaled.rows == rows && scaled.cols == cols &&
                  norm.weight->numel() == cols,
              "{}: folded norm of [{}, {}] with scaled rows [{}, {}] and a weight of {}", op, rows,
              cols, scaled.rows, scaled.cols, norm.weight->numel());
  SPECD_CHECK(sums.dtype == DType::kF32 && sums.rows == rows && sums.cols == (cols + 15) / 16,
              "{}: folded norm of [{}, {}] with sums [{}, {}] (want [{}, {}] f32)", op, rows, cols,
              sums.rows, sums.cols, rows, (cols + 15) / 16);
}

bool CudaBackend::folds_in_epilogue(const cuda::MatmulGroup& group) const {
  return fold_norms_ && small_tensor_core_group(group);
}

bool CudaBackend::readers_fold(const FoldedNorm& norm, int64_t rows) const {
  if (!fold_norms_ || rows == 0 || rows > kSmallBatch || norm.reader == nullptr ||
      norm.scaled == nullptr) {
    return false;
  }
  const Tensor& w = *norm.reader;
  cuda::MatmulGroup group;
  cuda::MatmulArgs& a = group.part[0];
  a.x = norm.scaled->ptr<const float>();
  a.x_stride = norm.scaled->stride;
  a.w = w.data;
  a.w_dtype = w.dtype;
  a.w_stride = w.stride;
  a.m = rows;
  a.n = w.rows;
  a.k = w.cols;
  group.count = 1;
  return folds_in_epilogue(group);
}

void CudaBackend::unfold(FoldedNorm& norm) {
  Tensor& s = *norm.scaled;
  if (s.rows > 0) {
    cuda::unfold_norm(s.ptr<float>(), s.stride, s.rows, s.cols, norm_in(norm), stream_);
  }
  norm.folded = false;
}

void CudaBackend::fold_norm(const Tensor& r, FoldedNorm& norm) {
  if (!readers_fold(norm, r.rows)) {
    Backend::fold_norm(r, norm);
    return;
  }
  check_device("fold_norm", index_, {&r});
  SPECD_CHECK(r.dtype == DType::kF32, "fold_norm: r must be f32");
  check_folded("fold_norm", r.rows, r.cols, norm);
  cuda::fold_norm(r.ptr<const float>(), r.stride, r.rows, r.cols, norm_out(norm), stream_);
  norm.folded = true;
}

void CudaBackend::matmul_norm_out(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                                  FoldedNorm& norm) {
  const MatmulPart part{&w, bias, &y};
  cuda::MatmulGroup group = make_group(x, std::span<const MatmulPart>(&part, 1), true);
  if (!readers_fold(norm, y.rows) || !folds_in_epilogue(group)) {
    Backend::matmul_norm_out(x, w, bias, y, norm);
    return;
  }
  check_folded("matmul_norm_out", y.rows, y.cols, norm);
  group.part[0].norm_out = norm_out(norm);
  run_small(group);
  norm.folded = true;
}

void CudaBackend::gated_matmul_norm_out(Activation act, Tensor& gate, const Tensor& up,
                                        const Tensor& w, const Tensor* bias, Tensor& y,
                                        FoldedNorm& norm) {
  cuda::MatmulGroup group = gated_int_group(act, gate, up, w, bias, y, true);
  if (group.count > 0 && readers_fold(norm, y.rows) && folds_in_epilogue(group)) {
    check_folded("gated_matmul_norm_out", y.rows, y.cols, norm);
    group.part[0].norm_out = norm_out(norm);
    run_small(group);
    norm.folded = true;
    return;
  }
  // act(gate) * up into gate, as Backend::gated_matmul does, then the folding matmul.
  gate_act_mul(act, gate, up, gate);
  matmul_norm_out(gate, w, bias, y, norm);
}

void CudaBackend::matmul_group_folded(FoldedNorm& norm, std::span<const MatmulPart> parts) {
  if (!norm.folded) {
    matmul_group(*norm.scaled, parts);
    return;
  }
  SPECD_CHECK(!parts.empty() && parts.size() <= cuda::MatmulGroup::kMaxParts,
              "matmul_group_folded: {} parts (1 to {})", parts.size(),
              cuda::MatmulGroup::kMaxParts);
  check_folded("matmul_group_folded", norm.scaled->rows, norm.scaled->cols, norm);
  cuda::MatmulGroup group = make_group(*norm.scaled, parts, false);
  if (!folds_in_epilogue(group)) {
    unfold(norm);
    matmul_group(*norm.scaled, parts);
    return;
  }
  for (int p = 0; p < group.count; ++p) group.part[p].norm_in = norm_in(norm);
  run_small(group);
}

bool CudaBackend::gate_up_act_folded(Activation act, FoldedNorm& norm, const Tensor& w_gate,
                                     const Tensor& w_up, Tensor& gate) {
  if (!norm.folded) return gate_up_act(act, *norm.scaled, w_gate, w_up, gate);
  check_folded("gate_up_act_folded", norm.scaled->rows, norm.scaled->cols, norm);
  cuda::MatmulGroup pair = gate_up_pair(act, *norm.scaled, w_gate, w_up, gate);
  if (pair.count == 0) return false;  // matmul_group_folded runs the products
  for (int p = 0; p < pair.count; ++p) pair.part[p].norm_in = norm_in(norm);
  run_small(pair);
  return true;
}

}  // namespace specd
