// Token choice on the CUDA device: argmax rows, sampled rows, speculative sampling of drafts.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace specd {

void CudaBackend::argmax_rows(const Tensor& logits, Tensor& ids) {
  check_device("argmax_rows", index_, {&logits, &ids});
  op_checks::argmax_rows(logits, ids);
  if (logits.rows == 0) return;
  void* slices = scratch(kArgmax, cuda::argmax_scratch_bytes(logits.rows, logits.cols));
  cuda::argmax_rows(logits.ptr<const float>(), logits.stride, logits.rows, logits.cols,
                    ids.ptr<int32_t>(), slices, stream_);
}

namespace {

cuda::SampleRow sample_row(const RowSampling& s) {
  return {s.temperature > 0 ? 1.0 / s.temperature : 0.0, s.top_p, s.min_p, s.u, s.top_k};
}

}  // namespace

bool CudaBackend::sample_rows(const Tensor& logits, std::span<const RowSampling> rows, Tensor& ids,
                              Tensor* probs) {
  if (!sampling_) return false;
  check_device("sample_rows", index_, {&logits, &ids});
  op_checks::argmax_rows(logits, ids);
  SPECD_CHECK(static_cast<int64_t>(rows.size()) == logits.rows,
              "sample_rows: {} sampling settings for {} rows", rows.size(), logits.rows);
  if (probs != nullptr) {
    check_device("sample_rows", index_, {probs});
    SPECD_CHECK(
        probs->dtype == DType::kF32 && probs->rows == logits.rows && probs->cols >= logits.cols,
        "sample_rows: probs must be f32 [{}, >= {}]", logits.rows, logits.cols);
  }
  if (logits.rows == 0) return true;
  SPECD_CHECK(logits.cols < (int64_t{1} << 30), "sample_rows: a row of {} columns is too long",
              logits.cols);
  cuda::SampleRowsArgs a;
  a.logits = logits.ptr<const float>();
  a.stride = logits.stride;
  a.cols = static_cast<int>(logits.cols);
  a.ids = ids.ptr<int32_t>();
  a.probs = probs != nullptr ? probs->ptr<float>() : nullptr;
  a.probs_stride = probs != nullptr ? probs->stride : 0;
  constexpr int kChunk = cuda::SampleRowsArgs::kMaxRows;
  const int64_t chunk_rows = std::min<int64_t>(kChunk, logits.rows);
  a.weights = static_cast<float*>(scratch(kSampling, chunk_rows * logits.cols * sizeof(float)));
  void* slices = scratch(kSampleSlices, cuda::sample_slices_scratch_bytes(logits.cols));
  for (int64_t first = 0; first < logits.rows; first += kChunk) {
    a.first_row = first;
    a.rows = static_cast<int>(std::min<int64_t>(kChunk, logits.rows - first));
    for (int r = 0; r < a.rows; ++r) a.row[r] = sample_row(rows[first + r]);
    cuda::sample_rows(a, slices, stream_);
  }
  return true;
}

bool CudaBackend::verify_sampled(const Tensor& logits, const RowSampling& sampling,
                                 const SampledDraft& draft, Tensor& ids) {
  if (!sampling_) return false;
  const int64_t k = draft.k;
  SPECD_CHECK(draft.device_tokens != nullptr || static_cast<int64_t>(draft.tokens.size()) == k,
              "verify_sampled: {} host draft tokens for k = {}", draft.tokens.size(), k);
  SPECD_CHECK(draft.q != nullptr, "verify_sampled: no draft distributions");
  check_device("verify_sampled", index_, {&logits, &ids, draft.q});
  op_checks::argmax_rows(logits, ids);
  SPECD_CHECK(logits.rows == k + 1 && k + 1 <= cuda::VerifySampledArgs::kMaxRows &&
                  static_cast<int64_t>(draft.u_accept.size()) == k &&
                  static_cast<int64_t>(draft.u_resample.size()) == k,
              "verify_sampled: {} rows for {} draft tokens (at most {})", logits.rows, k,
              cuda::VerifySampledArgs::kMaxRows - 1);
  SPECD_CHECK(draft.q->dtype == DType::kF32 && draft.q->rows >= k && draft.q->cols >= logits.cols,
              "verify_sampled: q must be f32 [{}, >= {}]", k, logits.cols);
  SPECD_CHECK(logits.cols < (int64_t{1} << 30), "verify_sampled: a row of {} columns is too long",
              logits.cols);
  cuda::VerifySampledArgs a;
  a.logits = logits.ptr<const float>();
  a.stride = logits.stride;
  a.q = draft.q->ptr<const float>();
  a.q_stride = draft.q->stride;
  a.rows = static_cast<int>(k + 1);
  a.cols = static_cast<int>(logits.cols);
  a.weights = static_cast<float*>(scratch(kSampling, (k + 1) * logits.cols * sizeof(float)));
  a.ids = ids.ptr<int32_t>();
  a.sampling = sample_row(sampling);
  a.device_draft = draft.device_tokens;  // checked on the device
  for (int64_t i = 0; i < k; ++i) {
    if (draft.device_tokens == nullptr) {
      SPECD_CHECK(draft.tokens[i] >= 0 && draft.tokens[i] < logits.cols,
                  "verify_sampled: draft token {} is outside the vocabulary", draft.tokens[i]);
      a.draft[i] = draft.tokens[i];
    }
    a.u_accept[i] = draft.u_accept[i];
    a.u_resample[i] = draft.u_resample[i];
  }
  a.u_sample = sampling.u;
  cuda::verify_sampled(a, stream_);
  return true;
}

}  // namespace specd
