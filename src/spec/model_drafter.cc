// Draft-model proposals: catch up on the committed context, then k single-row forwards.
#include "spec/model_drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"
#include "spec/verifier.h"

namespace specd {

ModelDrafter::ModelDrafter(Transformer& model, KvCache& kv, int target_vocab, int max_k,
                           double p_min)
    : model_(model),
      kv_(kv),
      target_vocab_(target_vocab),
      usable_vocab_(std::min(target_vocab, model.config().vocab_size)),
      p_min_(p_min),
      sampler_(usable_vocab_),
      positions_(model.limits().max_rows),
      logits_(model.config().vocab_size),
      scratch_(target_vocab),
      chain_(model.backend().alloc(kSmallBatch * sizeof(int32_t))),
      max_k_(max_k) {
  SPECD_CHECK(max_k >= 0, "draft length must be >= 0");
  cached_.reserve(kv.shape().capacity);
  if (model.backend().samples_on_device() && max_k > 0) {
    // Columns past the draft's vocabulary stay zero: q gives them no mass.
    const std::vector<float> zeros(static_cast<size_t>(max_k) * target_vocab, 0.0f);
    q_rows_ = model.backend().alloc(zeros.size() * sizeof(float));
    model.backend().copy_to_device(q_rows_.data(), zeros.data(), zeros.size() * sizeof(float));
  }
}

void ModelDrafter::reset() {
  cached_.clear();
  unread_ = 0;
  kv_.truncate(0, 0);
}

void ModelDrafter::warm_up() {
  if (!model_.backend().records_forwards()) return;
  // The catch-up chunks (full ones, and last ones that pick their last row's logits) and the
  // one-row draft step.
  std::vector<ForwardShape> shapes{{kSmallBatch, 0}};
  for (int rows = kSmallBatch; rows >= 1; --rows) shapes.push_back({rows, 1});
  shapes.push_back({1, -1});
  model_.run_shapes(shapes, kv_);
  reset();
}

Tensor ModelDrafter::forward_rows(std::span<const int32_t> context, size_t begin, size_t end,
                                  size_t chunk, bool logits_of_last) {
  Tensor logits;
  while (begin < end) {
    const size_t stop = std::min(end, begin + chunk);
    const int rows = static_cast<int>(stop - begin);
    std::iota(positions_.begin(), positions_.begin() + rows, static_cast<int32_t>(begin));
    int32_t last = rows - 1;
    ForwardBatch batch{rows, context.data() + begin, positions_.data()};
    batch.logit_rows = &last;
    batch.n_logit_rows = logits_of_last && stop == end ? 1 : 0;
    logits = model_.forward(batch, kv_);
    cached_.insert(cached_.end(), context.begin() + begin, context.begin() + stop);
    begin = stop;
  }
  kv_.set_length(0, static_cast<int>(cached_.size()));
  return logits;
}

void ModelDrafter::prefill(std::span<const int32_t> prompt) {
  if (!cached_.empty()) return;  // a context already begun: propose catches up on the rest
  kv_.truncate(0, 0);
  forward_rows(prompt, 0, prompt.size(), model_.limits().max_rows, false);
}

Tensor ModelDrafter::catch_up(std::span<const int32_t> context, double* prefill_seconds) {
  size_t common = 0;
  const size_t limit = std::min(cached_.size(), context.size() - 1);  // re-run at least one
  while (common < limit && cached_[common] == context[common]) ++common;
  cached_.resize(common);
  kv_.truncate(0, static_cast<int>(common));
  // A fresh context is prefilled as the target prefills its prompt (chunks of max rows) up to
  // the last token; everything after runs through the small-batch kernels, so the draft cache
  // holds exactly what prefill + one-row decoding would.
  const size_t n = context.size();
  const size_t prefill_end = common == 0 ? n - 1 : common;
  const double start = now_seconds();
  forward_rows(context, common, prefill_end, model_.limits().max_rows, false);
  if (common == 0) *prefill_seconds = now_seconds() - start;
  return forward_rows(context, prefill_end, n, kSmallBatch, true);
}

int32_t ModelDrafter::choose(const float* logits, const SamplingParams& params, int64_t position,
                             float* probs, float* top_prob) {
  // Only tokens both vocabularies share can be proposed.
  std::span<const float> row(logits, usable_vocab_);
  if (params.greedy()) {
    int32_t best = Sampler::argmax(row);
    if (p_min_ > 0) {  // the draft's confidence, for early stopping
      double total = 0;
      for (float l : row) total += std::exp(static_cast<double>(l) - row[best]);
      *top_prob = static_cast<float>(1.0 / total);
    }
    return best;
  }
  SamplingParams draft_params = params;  // the draft samples without penalties
  draft_params.repetition_penalty = 1.0;
  sampler_.distribution(row, draft_params, std::span<float>(probs, usable_vocab_));
  std::fill(probs + usable_vocab_, probs + target_vocab_, 0.0f);
  *top_prob = *std::max_element(probs, probs + usable_vocab_);
  double u = random_uniform(params.seed, position, RandomPurpose::kDraft);
  return Sampler::sample_from(std::span<const float>(probs, target_vocab_), u);
}

void ModelDrafter::propose_on_device(Tensor logits, int max_k, const SamplingParams& params,
                                     int64_t position, const Tensor& q_rows, DraftProposal& out) {
  Backend& backend = model_.backend();
  int32_t* chain = static_cast<int32_t*>(chain_.data());
  for (int j = 0; j < max_k; ++j) {
    Tensor shared = logits;  // only the columns both vocabularies share
    shared.cols = usable_vocab_;
    Tensor id = Tensor::make(chain + j, DType::kI32, 1, 1, backend.device());
    if (q_rows.data == nullptr) {
      backend.argmax_rows(shared, id);
    } else {
      Tensor q = q_rows.slice_rows(j, 1);
      q.cols = usable_vocab_;
      const RowSampling draw = device_draw(params, position + j, RandomPurpose::kDraft);
      backend.sample_rows(shared, std::span<const RowSampling>(&draw, 1), id, &q);
    }
    if (j + 1 == max_k) break;
    ForwardBatch batch{1, nullptr, positions_.data()};
    batch.device_tokens = chain + j;
    positions_[0] = static_cast<int32_t>(position + j);
    logits = model_.forward(batch, kv_);
  }
  unread_ = max_k - 1;  // the last token has not run through the draft
  kv_.set_length(0, static_cast<int>(cached_.size()) + unread_);
  if (out.device_tokens_ok && out.verify_device == backend.device()) {
    out.device_tokens = chain;
    out.device_count = max_k;
    out.queued_on = &backend;
    return;
  }
  out.tokens.resize(max_k);
  backend.copy_to_host(out.tokens.data(), chain, max_k * sizeof(int32_t));
  device_tokens_read(out.tokens);
}

void ModelDrafter::device_tokens_read(std::span<const int32_t> tokens) {
  SPECD_CHECK(static_cast<int>(tokens.size()) > unread_, "{} draft tokens read of {}",
              tokens.size(), unread_ + 1);
  for (int32_t token : tokens) SPECD_CHECK(token >= 0, "no token has a finite logit");
  cached_.insert(cached_.end(), tokens.begin(), tokens.begin() + unread_);
  unread_ = 0;
}

void ModelDrafter::propose_on_host(Tensor logits, int max_k, const SamplingParams& params,
                                   int64_t position, DraftProposal& out) {
  for (int j = 0; j < max_k; ++j) {
    float top_prob = 1.0f;
    model_.backend().copy_to_host(logits_.data(), logits.data, logits_.size() * sizeof(float));
    float* probs =
        out.sampled ? out.probs.data() + static_cast<size_t>(j) * target_vocab_ : scratch_.data();
    const int32_t token = choose(logits_.data(), params, position, probs, &top_prob);
    if (j > 0 && top_prob < p_min_) break;
    out.tokens.push_back(token);
    if (j + 1 == max_k) break;
    ForwardBatch batch{1, &token, positions_.data()};
    positions_[0] = static_cast<int32_t>(position);
    logits = model_.forward(batch, kv_);
    cached_.push_back(token);
    kv_.set_length(0, static_cast<int>(cached_.size()));
    ++position;
  }
}

void ModelDrafter::propose(std::span<const int32_t> context, int max_k,
                           const SamplingParams& params, DraftProposal& out) {
  double start = now_seconds();
  SPECD_CHECK(unread_ == 0, "a draft proposal's device tokens were never read");
  out.clear();
  out.sampled = !params.greedy();
  if (out.sampled && out.probs.size() < static_cast<size_t>(max_k) * target_vocab_) {
    out.probs.resize(static_cast<size_t>(max_k) * target_vocab_);
  }
  if (max_k <= 0) return;
  SPECD_CHECK(static_cast<int64_t>(context.size()) + max_k <= kv_.shape().capacity,
              "draft context of {} tokens exceeds its cache", context.size() + max_k);
  Tensor logits = catch_up(context, &out.prefill_seconds);
  int64_t position = static_cast<int64_t>(context.size());  // where the next draft token sits
  // Greedy drafting without the confidence stop picks tokens on the device, each feeding the
  // next step there: the k ids cross to the host once, instead of a logits row per token.
  const bool device_argmax = !out.sampled && p_min_ <= 0;
  // Sampled drafting where the target verifies on this device draws there too and leaves q there.
  Backend& backend = model_.backend();
  const bool device_q = out.sampled && !params.has_penalties() && p_min_ <= 0 &&
                        q_rows_.data() != nullptr && max_k <= max_k_ &&
                        out.verify_device == backend.device();
  const Tensor q_rows = device_q ? q_rows_.view(DType::kF32, max_k, target_vocab_) : Tensor{};
  if ((device_argmax || device_q) && max_k <= kSmallBatch) {
    propose_on_device(logits, max_k, params, position, q_rows, out);
  } else {
    propose_on_host(logits, max_k, params, position, out);
  }
  if (device_q) out.device_probs = q_rows.slice_rows(0, out.size());
  out.seconds = now_seconds() - start;
}

}  // namespace specd
