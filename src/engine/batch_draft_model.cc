// Batched draft-model proposals (see batch_draft_model.h).
#include "engine/batch_draft_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"
#include "sample/philox.h"

namespace specd {

BatchDraftModel::BatchDraftModel(Transformer& model, KvCache& kv, int target_vocab, double p_min)
    : model_(model),
      kv_(kv),
      target_vocab_(target_vocab),
      usable_vocab_(std::min(target_vocab, model.config().vocab_size)),
      draft_vocab_(model.config().vocab_size),
      p_min_(p_min),
      sampler_(usable_vocab_),
      slots_(kv.shape().n_slots),
      tokens_(kSmallBatch),
      positions_(std::max<int>(kSmallBatch, model.limits().max_rows)),
      row_slots_(std::max<int>(kSmallBatch, model.limits().max_rows)),
      logit_rows_(kSmallBatch),
      host_logits_(static_cast<size_t>(kSmallBatch) * model.config().vocab_size),
      argmax_buffer_(model.backend().alloc(kSmallBatch * sizeof(int32_t))),
      argmax_(kSmallBatch),
      scratch_(target_vocab) {
  SPECD_CHECK(model.limits().max_logit_rows >= kSmallBatch,
              "the draft model needs {} logit rows per forward", kSmallBatch);
  for (SlotState& s : slots_) {
    s.cached.reserve(kv.shape().capacity);
    s.logits.resize(draft_vocab_);
  }
}

void BatchDraftModel::reset(int slot) {
  slots_.at(slot).cached.clear();
  kv_.truncate(slot, 0);
}

std::span<const int32_t> BatchDraftModel::catch_up(const Job& job) {
  SlotState& s = slots_[job.slot];
  const std::span<const int32_t> context = job.context;
  size_t common = 0;
  const size_t limit = std::min(s.cached.size(), context.size() - 1);  // re-run at least one
  while (common < limit && s.cached[common] == context[common]) ++common;
  s.cached.resize(common);
  kv_.truncate(job.slot, static_cast<int>(common));
  const size_t n = context.size();
  if (common == 0 && n > 1) {
    // A fresh context: prefill all but the last token alone, in chunks of max rows.
    const int chunk = model_.limits().max_rows;
    for (size_t begin = 0; begin < n - 1; begin += chunk) {
      const int rows = static_cast<int>(std::min<size_t>(chunk, n - 1 - begin));
      std::iota(positions_.begin(), positions_.begin() + rows, static_cast<int32_t>(begin));
      std::fill(row_slots_.begin(), row_slots_.begin() + rows, job.slot);
      ForwardBatch batch{rows, context.data() + begin, positions_.data(), row_slots_.data()};
      int32_t none = 0;
      batch.logit_rows = &none;
      batch.n_logit_rows = 0;
      model_.forward(batch, kv_);
    }
    s.cached.assign(context.begin(), context.end() - 1);
    common = n - 1;
  }
  return context.subspan(common);
}

void BatchDraftModel::run_rows(const std::vector<Job*>& jobs,
                               const std::vector<std::span<const int32_t>>& rows,
                               const std::vector<int32_t>& first_position, bool ids_only) {
  // Packs whole per-job row ranges greedily into forwards of <= kSmallBatch rows; a range longer
  // than that is split over several forwards (its logits come from the last).
  size_t j = 0;
  size_t offset = 0;  // rows of jobs[j] already run
  while (j < jobs.size()) {
    int used = 0, n_logits = 0;
    std::vector<std::pair<size_t, int>> logit_of;  // (job index, logit row index)
    while (j < jobs.size() && used < kSmallBatch) {
      const std::span<const int32_t> r = rows[j];
      const size_t left = r.size() - offset;
      const size_t take = std::min<size_t>(left, kSmallBatch - used);
      if (take < left && used > 0) break;  // start long ranges in a fresh forward
      for (size_t i = 0; i < take; ++i) {
        tokens_[used + i] = r[offset + i];
        positions_[used + i] = first_position[j] + static_cast<int32_t>(offset + i);
        row_slots_[used + i] = jobs[j]->slot;
      }
      used += static_cast<int>(take);
      if (take == left) {
        logit_rows_[n_logits] = used - 1;
        logit_of.emplace_back(j, n_logits++);
        ++j;
        offset = 0;
      } else {
        offset += take;
      }
    }
    ForwardBatch batch{used, tokens_.data(), positions_.data(), row_slots_.data()};
    batch.logit_rows = logit_rows_.data();
    batch.n_logit_rows = n_logits;
    Tensor logits = model_.forward(batch, kv_);
    Backend& backend = model_.backend();
    if (n_logits > 0 && ids_only) {
      Tensor ids = argmax_buffer_.view(DType::kI32, 1, logits.rows);
      backend.argmax_rows(logits, ids);
      backend.copy_to_host(argmax_.data(), ids.data, ids.bytes());
    } else if (n_logits > 0) {
      backend.copy_to_host(host_logits_.data(), logits.data, logits.bytes());
    }
    for (const auto& [job, row] : logit_of) {
      SlotState& s = slots_[jobs[job]->slot];
      s.argmax = ids_only ? argmax_[row] : -1;
      if (!ids_only) {
        std::copy_n(host_logits_.data() + static_cast<size_t>(row) * draft_vocab_, draft_vocab_,
                    s.logits.data());
      }
    }
  }
}

int32_t BatchDraftModel::choose(const SlotState& s, const SamplingParams& params, float* probs,
                                float* top_prob) {
  if (s.argmax >= 0) return s.argmax;
  std::span<const float> row(s.logits.data(), usable_vocab_);
  const int64_t position = s.position;
  if (params.greedy()) {
    int32_t best = Sampler::argmax(row);
    if (p_min_ > 0) {
      double total = 0;
      for (float l : row) total += std::exp(static_cast<double>(l) - row[best]);
      *top_prob = static_cast<float>(1.0 / total);
    }
    return best;
  }
  SamplingParams draft_params = params;  // the draft samples without penalties
  draft_params.repetition_penalty = 1.0;
  draft_params.presence_penalty = 0.0;
  draft_params.frequency_penalty = 0.0;
  sampler_.distribution(row, draft_params, std::span<float>(probs, usable_vocab_));
  std::fill(probs + usable_vocab_, probs + target_vocab_, 0.0f);
  *top_prob = *std::max_element(probs, probs + usable_vocab_);
  double u = random_uniform(params.seed, position, RandomPurpose::kDraft);
  return Sampler::sample_from(std::span<const float>(probs, target_vocab_), u);
}

void BatchDraftModel::propose(std::vector<Job>& jobs) {
  const double start = now_seconds();
  std::vector<Job*> active;
  std::vector<std::span<const int32_t>> rows;
  std::vector<int32_t> first;
  for (Job& job : jobs) {
    DraftProposal& out = *job.out;
    out.tokens.clear();
    out.sampled = !job.params->greedy();
    if (job.max_k <= 0) continue;
    if (out.sampled && out.probs.size() < static_cast<size_t>(job.max_k) * target_vocab_) {
      out.probs.resize(static_cast<size_t>(job.max_k) * target_vocab_);
    }
    SPECD_CHECK(static_cast<int64_t>(job.context.size()) + job.max_k <= kv_.shape().capacity,
                "draft context of {} tokens exceeds its cache", job.context.size() + job.max_k);
    std::span<const int32_t> pending = catch_up(job);
    SlotState& s = slots_[job.slot];
    active.push_back(&job);
    rows.push_back(pending);
    first.push_back(static_cast<int32_t>(s.cached.size()));
    s.cached.insert(s.cached.end(), pending.begin(), pending.end());
    s.position = static_cast<int64_t>(job.context.size());
    s.done = false;
  }
  if (active.empty()) return;
  // Greedy chains without a probability cut only need each row's argmax: it is found on the
  // model's device and only the ids come back (the draft's whole vocabulary is usable).
  const bool ids_only = p_min_ <= 0 && usable_vocab_ == draft_vocab_ &&
                        std::all_of(active.begin(), active.end(),
                                    [](const Job* job) { return job->params->greedy(); });
  run_rows(active, rows, first, ids_only);
  std::vector<int32_t> next(active.size());
  for (int step = 0; !active.empty(); ++step) {
    std::vector<Job*> still;
    std::vector<std::span<const int32_t>> step_rows;
    std::vector<int32_t> step_first;
    for (size_t i = 0; i < active.size(); ++i) {
      Job& job = *active[i];
      SlotState& s = slots_[job.slot];
      DraftProposal& out = *job.out;
      const int j = static_cast<int>(out.tokens.size());
      float* probs =
          out.sampled ? out.probs.data() + static_cast<size_t>(j) * target_vocab_ : scratch_.data();
      float top_prob = 1.0f;
      int32_t token = choose(s, *job.params, probs, &top_prob);
      if (j > 0 && top_prob < p_min_) continue;
      out.tokens.push_back(token);
      if (j + 1 == job.max_k) continue;
      next[still.size()] = token;
      still.push_back(&job);
      step_first.push_back(static_cast<int32_t>(s.position));
      s.cached.push_back(token);
      ++s.position;
    }
    for (size_t i = 0; i < still.size(); ++i) step_rows.emplace_back(&next[i], 1);
    if (!still.empty()) run_rows(still, step_rows, step_first, ids_only);
    active.swap(still);
  }
  for (Job& job : jobs) {
    kv_.set_length(job.slot, static_cast<int>(slots_[job.slot].cached.size()));
  }
  // The time is shared by the jobs; each is charged its share.
  const double seconds = (now_seconds() - start) / std::max<size_t>(1, jobs.size());
  for (Job& job : jobs) job.out->seconds += seconds;
}

}  // namespace specd
