// Batched draft-model proposals (see batch_draft_model.h).
#include "engine/batch_draft_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"
#include "sample/philox.h"
#include "spec/verifier.h"

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
      ids_buffer_(model.backend().alloc(2 * kSmallBatch * sizeof(int32_t))),
      ids_(2 * kSmallBatch),
      draws_(kSmallBatch),
      scratch_(target_vocab) {
  SPECD_CHECK(model.limits().max_logit_rows >= kSmallBatch,
              "the draft model needs {} logit rows per forward", kSmallBatch);
  for (SlotState& s : slots_) {
    s.cached.reserve(kv.shape().capacity);
    s.logits.resize(draft_vocab_);
  }
  if (model.backend().samples_on_device()) {
    // Columns past the draft's vocabulary stay zero: q gives them no mass.
    const size_t row_bytes = static_cast<size_t>(target_vocab_) * sizeof(float);
    const std::vector<float> zeros(target_vocab_, 0.0f);
    draw_probs_ = model.backend().alloc(kSmallBatch * row_bytes);
    for (int64_t r = 0; r < kSmallBatch; ++r) {
      model.backend().copy_to_device(static_cast<char*>(draw_probs_.data()) + r * row_bytes,
                                     zeros.data(), row_bytes);
    }
  }
}

BatchDraftModel::Path BatchDraftModel::path_of(const Job& job) const {
  if (p_min_ > 0) return Path::kHostLogits;  // the cut needs each row's top probability
  if (job.params->greedy()) return Path::kDeviceArgmax;
  const bool device = model_.backend().samples_on_device() && job.device_verify &&
                      job.out->verify_device == model_.backend().device();
  return device ? Path::kDeviceDraw : Path::kHostLogits;
}

void BatchDraftModel::reset(int slot) {
  slots_.at(slot).cached.clear();
  kv_.truncate(slot, 0);
}

void BatchDraftModel::warm_up() {
  if (!model_.backend().records_forwards()) return;
  // Full catch-up chunks and drafting forwards.
  std::vector<ForwardShape> shapes{{kSmallBatch, 0}};
  for (int rows = kSmallBatch; rows >= 1; --rows) {
    for (int picked = std::min(rows, kv_.shape().n_slots); picked >= 1; --picked) {
      shapes.push_back({rows, picked});
    }
  }
  model_.run_shapes(shapes, kv_);
  reset(0);
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
  if (common == 0 && n - 1 > static_cast<size_t>(kSmallBatch)) {
    const double start = now_seconds();
    // A fresh context longer than one small forward: all but the last token alone, in chunks of
    // max rows. Shorter ones share the round's forwards with the other sequences' rows.
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
    job.out->prefill_seconds = now_seconds() - start;
  }
  return context.subspan(common);
}

void BatchDraftModel::run_rows(const std::vector<Job*>& jobs,
                               const std::vector<std::span<const int32_t>>& rows,
                               const std::vector<int32_t>& first_position) {
  // Packs whole per-job row ranges greedily into forwards of <= kSmallBatch rows; a range longer
  // than that is split over several forwards (its logits come from the last).
  size_t j = 0;
  size_t offset = 0;  // rows of jobs[j] already run
  while (j < jobs.size()) {
    int used = 0, n_logits = 0;
    std::vector<size_t> logit_of;  // job index of each logit row
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
        logit_rows_[n_logits++] = used - 1;
        logit_of.push_back(j);
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
    if (n_logits > 0) take_logits(logits, jobs, logit_of);
  }
}

void BatchDraftModel::take_logits(const Tensor& logits, const std::vector<Job*>& jobs,
                                  const std::vector<size_t>& logit_of) {
  Backend& backend = model_.backend();
  const int64_t n = logits.rows;
  bool argmax = false, draw = false, host = false;
  for (size_t job : logit_of) {
    const Path path = slots_[jobs[job]->slot].path;
    argmax |= path == Path::kDeviceArgmax;
    draw |= path == Path::kDeviceDraw;
    host |= path == Path::kHostLogits;
  }
  Tensor shared = logits;  // only the columns both vocabularies share
  shared.cols = usable_vocab_;
  if (argmax) {
    Tensor ids = ids_buffer_.view(DType::kI32, 1, n);
    backend.argmax_rows(shared, ids);
  }
  Tensor q;  // [n, target vocab] f32: the draws' q rows
  if (draw) {
    q = draw_probs_.view(DType::kF32, n, target_vocab_);
    for (int64_t i = 0; i < n; ++i) {  // row i: a draw at the job's next position
      const SlotState& s = slots_[jobs[logit_of[i]]->slot];
      const SamplingParams& p = *jobs[logit_of[i]]->params;
      draws_[i] = device_draw(p, s.position, RandomPurpose::kDraft);
    }
    Tensor ids = ids_buffer_.view(DType::kI32, 2, kSmallBatch).slice_rows(1, 1);
    ids.cols = n;
    Tensor probs = q;
    probs.cols = usable_vocab_;
    SPECD_CHECK(
        backend.sample_rows(shared, std::span<const RowSampling>(draws_.data(), n), ids, &probs),
        "the draft model's device cannot sample");
  }
  if (argmax || draw) {
    const size_t count = draw ? kSmallBatch + n : n;
    backend.copy_to_host(ids_.data(), ids_buffer_.data(), count * sizeof(int32_t));
  }
  if (host) backend.copy_to_host(host_logits_.data(), logits.data, logits.bytes());
  for (int64_t i = 0; i < n; ++i) {
    SlotState& s = slots_[jobs[logit_of[i]]->slot];
    s.chosen = -1;
    if (s.path == Path::kDeviceArgmax) {
      s.chosen = ids_[i];
    } else if (s.path == Path::kDeviceDraw) {
      s.chosen = ids_[kSmallBatch + i];
      SPECD_CHECK(s.chosen >= 0, "no draft token has a finite logit");
      const size_t row_bytes = static_cast<size_t>(target_vocab_) * sizeof(float);
      backend.copy_on_device(static_cast<char*>(s.q.data()) + s.draft_index * row_bytes,
                             q.row<float>(i), row_bytes);
    } else {
      std::copy_n(host_logits_.data() + static_cast<size_t>(i) * draft_vocab_, draft_vocab_,
                  s.logits.data());
    }
  }
}

int32_t BatchDraftModel::choose(const SlotState& s, const SamplingParams& params, float* probs,
                                float* top_prob) {
  if (s.chosen >= 0) return s.chosen;
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
    out.prefill_seconds = 0;
    out.sampled = !job.params->greedy();
    out.device_probs = Tensor{};
    if (job.max_k <= 0) continue;
    SlotState& s = slots_[job.slot];
    s.path = path_of(job);
    if (s.path == Path::kDeviceDraw && s.q_rows < job.max_k) {
      // Once per slot and larger length: every row is overwritten whole before it is read.
      s.q = model_.backend().alloc(static_cast<size_t>(job.max_k) * target_vocab_ * 4);
      s.q_rows = job.max_k;
    }
    if (s.path == Path::kHostLogits && out.sampled &&
        out.probs.size() < static_cast<size_t>(job.max_k) * target_vocab_) {
      out.probs.resize(static_cast<size_t>(job.max_k) * target_vocab_);
    }
    SPECD_CHECK(static_cast<int64_t>(job.context.size()) + job.max_k <= kv_.shape().capacity,
                "draft context of {} tokens exceeds its cache", job.context.size() + job.max_k);
    std::span<const int32_t> pending = catch_up(job);
    active.push_back(&job);
    rows.push_back(pending);
    first.push_back(static_cast<int32_t>(s.cached.size()));
    s.cached.insert(s.cached.end(), pending.begin(), pending.end());
    s.position = static_cast<int64_t>(job.context.size());
    s.draft_index = 0;
  }
  if (active.empty()) return;
  run_rows(active, rows, first);
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
      const bool host_q = out.sampled && s.path == Path::kHostLogits;
      float* probs =
          host_q ? out.probs.data() + static_cast<size_t>(j) * target_vocab_ : scratch_.data();
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
      ++s.draft_index;
    }
    for (size_t i = 0; i < still.size(); ++i) step_rows.emplace_back(&next[i], 1);
    if (!still.empty()) run_rows(still, step_rows, step_first);
    active.swap(still);
  }
  for (Job& job : jobs) {
    SlotState& s = slots_[job.slot];
    kv_.set_length(job.slot, static_cast<int>(s.cached.size()));
    DraftProposal& out = *job.out;
    if (job.max_k > 0 && s.path == Path::kDeviceDraw && !out.tokens.empty()) {
      out.device_probs = s.q.view(DType::kF32, s.q_rows, target_vocab_)
                             .slice_rows(0, static_cast<int64_t>(out.tokens.size()));
    }
  }
  // The time is shared by the jobs; each is charged its share, and its own prefill.
  double prefills = 0;
  for (const Job& job : jobs) prefills += job.out->prefill_seconds;
  const double shared = (now_seconds() - start - prefills) / std::max<size_t>(1, jobs.size());
  for (Job& job : jobs) job.out->seconds += shared + job.out->prefill_seconds;
}

}  // namespace specd
