// The decode loop shared by plain and speculative generation.
#include "engine/generator.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"
#include "sample/philox.h"

namespace specd {

Generator::Generator(Transformer& model, KvCache& kv, Drafter* drafter,
                     DraftLengthOptions draft_length, int slot)
    : model_(model),
      kv_(kv),
      drafter_(drafter),
      draft_length_(draft_length),
      learned_(std::make_shared<DraftLengthPolicy>(draft_length)),
      slot_(slot),
      queued_(model.backend().queues_work()),
      verifier_(model.config().vocab_size),
      prompt_history_(model.config().vocab_size),
      output_history_(model.config().vocab_size),
      logits_(static_cast<size_t>(model.limits().max_logit_rows) * model.config().vocab_size),
      ids_buffer_(model.backend().alloc(2 * model.limits().max_logit_rows * sizeof(int32_t))),
      ids_(2 * model.limits().max_logit_rows),
      row_sampling_(model.limits().max_logit_rows),
      u_accept_(model.limits().max_logit_rows),
      u_resample_(model.limits().max_logit_rows),
      rows_(model.limits().max_rows),
      positions_(model.limits().max_rows),
      slots_(model.limits().max_rows, slot) {
  const int limit = model.limits().max_logit_rows - 1;
  SPECD_CHECK(std::max(draft_length.max_k, draft_length.fixed_k) <= limit,
              "draft length {} exceeds the verification limit of {} tokens",
              std::max(draft_length.max_k, draft_length.fixed_k), limit);
  proposal_.tokens.reserve(limit);
  verdict_.emitted.reserve(limit + 1);
}

void Generator::warm_up() {
  // Verification of each draft length.
  const int max_k = !drafter_                   ? 0
                    : draft_length_.fixed_k > 0 ? draft_length_.fixed_k
                                                : draft_length_.max_k;
  std::vector<ForwardShape> shapes;
  for (int k = max_k; k >= 0; --k) shapes.push_back({k + 1, -1});
  const bool records = model_.backend().records_forwards();
  for (int run = 0; run < 2; ++run) {  // the second run records
    if (records) model_.run_shapes(shapes, kv_, slot_);
    if (drafter_) drafter_->warm_up();
  }
}

Tensor Generator::prefill(const std::vector<int32_t>& prompt) {
  const int n = static_cast<int>(prompt.size());
  SPECD_CHECK(n > 0, "the prompt is empty");
  const int vocab = model_.config().vocab_size;
  for (int32_t token : prompt) {
    SPECD_CHECK(token >= 0 && token < vocab, "prompt token {} is outside the vocabulary of {}",
                token, vocab);
  }
  SPECD_CHECK(n <= kv_.shape().capacity, "the prompt ({} tokens) exceeds the context of {}", n,
              kv_.shape().capacity);
  const int chunk = model_.limits().max_rows;
  Tensor logits;
  for (int begin = 0; begin < n; begin += chunk) {
    int rows = std::min(chunk, n - begin);
    std::iota(positions_.begin(), positions_.begin() + rows, begin);
    ForwardBatch batch{rows, prompt.data() + begin, positions_.data(), slots_.data()};
    int32_t last_row = rows - 1;
    batch.logit_rows = &last_row;
    batch.n_logit_rows = begin + rows == n ? 1 : 0;
    logits = model_.forward(batch, kv_);
  }
  kv_.set_length(slot_, n);
  return logits;
}

void Generator::fetch_for_verify(const Tensor& logits, const SamplingParams& params,
                                 int64_t position) {
  Backend& backend = model_.backend();
  Tensor ids = ids_buffer_.view(DType::kI32, 1, logits.rows);
  const bool point_masses = proposal_.size() == 0 || !proposal_.sampled;
  fetched_ids_ = false;
  if (params.greedy() && !params.has_penalties()) {
    backend.argmax_rows(logits, ids);
    fetched_ids_ = true;
  } else if (!params.has_penalties() && point_masses) {
    // Row i's token is plain decoding's draw at position + i (Verifier::verify's rule).
    for (int64_t i = 0; i < logits.rows; ++i) {
      row_sampling_[i] = device_draw(params, position + i, RandomPurpose::kSample);
    }
    fetched_ids_ = backend.sample_rows(
        logits, std::span<const RowSampling>(row_sampling_.data(), logits.rows), ids, nullptr);
  } else if (!params.has_penalties() && proposal_.device_probs.data != nullptr) {
    // Sampled drafts whose q stayed on this device: speculative sampling there.
    RowSampling bonus;
    const SampledDraft draft =
        device_verify_inputs(proposal_, params, position, u_accept_, u_resample_, &bonus);
    fetched_ids_ = backend.verify_sampled(logits, bonus, draft, ids);
  }
  SPECD_CHECK(fetched_ids_ ||
                  (proposal_.device_probs.data == nullptr && proposal_.device_tokens == nullptr),
              "drafts left on the device need device-side verification");
  verify_end_ = backend.mark();
  if (!fetched_ids_) {
    backend.copy_to_host(logits_.data(), logits.data, logits.bytes());
    return;
  }
  // Draft tokens left on the device come with the ids, in one download.
  int64_t count = logits.rows;
  if (proposal_.device_tokens != nullptr) {
    backend.copy_on_device(ids.ptr<int32_t>() + count, proposal_.device_tokens,
                           proposal_.device_count * sizeof(int32_t));
    count += proposal_.device_count;
  }
  backend.copy_to_host(ids_.data(), ids.data, count * sizeof(int32_t));
  if (proposal_.device_tokens != nullptr) {
    proposal_.tokens.assign(ids_.begin() + logits.rows, ids_.begin() + count);
    proposal_.device_tokens = nullptr;
    drafter_->device_tokens_read(proposal_.tokens);
  }
}

void Generator::verify_fetched(const SamplingParams& params, int64_t position) {
  if (fetched_ids_) {
    Verifier::verify_tokens(ids_.data(), proposal_, output_history_, verdict_);
  } else {
    verifier_.verify(logits_.data(), proposal_, params, position, prompt_history_, output_history_,
                     verdict_);
  }
}

void Generator::record_last_round(DraftLengthPolicy& policy, GenerationStats& stats) {
  if (!last_round_.pending) return;
  last_round_.pending = false;
  const RoundMarks& r = last_round_;
  Backend& backend = model_.backend();
  // Device times: the draft steps may still run while verification is queued.
  const double draft_seconds = backend.seconds_between(r.draft_start, r.verify_start);
  const double verify_seconds = backend.seconds_between(r.verify_start, r.verify_end);
  stats.draft_seconds += draft_seconds;
  stats.verify_seconds += verify_seconds;
  if (drafter_) {
    policy.record(r.drafted, r.accepted, draft_seconds - r.prefill_seconds, r.drafted + 1,
                  verify_seconds);
  }
}

bool Generator::queues_plain(const SamplingParams& params) const {
  return queued_ && drafter_ == nullptr && !params.has_penalties() &&
         (params.greedy() || model_.backend().samples_on_device());
}

void Generator::decode_queued(int remaining, const SamplingParams& params,
                              const std::function<bool(int32_t)>& emit, GenerationStats& stats) {
  Backend& backend = model_.backend();
  const int n = static_cast<int>(context_.size());  // context_.back() is not in the cache yet
  Tensor ids = ids_buffer_.view(DType::kI32, 1, 1);
  // Forward `step` reads the token at position n - 1 + step: context_.back() for step 0, else
  // the token the forward before chose, still on the device. Returns its token's download.
  auto queue = [&](int step) {
    positions_[0] = n - 1 + step;
    ForwardBatch batch{1, &context_.back(), positions_.data(), slots_.data()};
    if (step > 0) batch.device_tokens = ids.ptr<const int32_t>();
    Tensor logits = model_.forward(batch, kv_);
    if (params.greedy()) {
      backend.argmax_rows(logits, ids);
    } else {
      row_sampling_[0] = device_draw(params, n + step, RandomPurpose::kSample);
      const bool drawn = backend.sample_rows(
          logits, std::span<const RowSampling>(row_sampling_.data(), 1), ids, nullptr);
      SPECD_CHECK(drawn, "queued decoding needs tokens drawn on the device");
    }
    return backend.start_download(ids.data, sizeof(int32_t));
  };
  uint64_t tickets[2] = {queue(0), 0};
  int queued = 1;
  for (int step = 0; step < remaining; ++step) {
    const double start = now_seconds();
    if (queued < remaining) {
      tickets[queued % 2] = queue(queued);
      ++queued;
    }
    int32_t token = 0;
    backend.finish_download(tickets[step % 2], &token);
    SPECD_CHECK(token >= 0, "no token has a finite logit");
    kv_.set_length(slot_, n + step);
    stats.rounds += 1;
    stats.verify_seconds += now_seconds() - start;
    if (!emit(token)) break;
  }
}

GenerationResult Generator::generate(const GenerateRequest& request,
                                     const TokenCallback& on_token) {
  validate_sampling_params(request.sampling);
  SPECD_CHECK(request.max_tokens >= 1, "max_tokens must be >= 1");
  const int n_prompt = static_cast<int>(request.prompt.size());
  const int capacity = kv_.shape().capacity;
  SPECD_CHECK(n_prompt + request.max_tokens <= capacity,
              "prompt ({}) + max_tokens ({}) exceed the context size ({})", n_prompt,
              request.max_tokens, capacity);
  const SamplingParams& params = request.sampling;
  GenerationResult result;
  GenerationStats& stats = result.stats;
  result.finish_reason = "length";
  stats.prompt_tokens = n_prompt;
  result.tokens.reserve(request.max_tokens);
  prompt_history_.clear();
  output_history_.clear();
  if (params.repetition_penalty != 1.0) {
    for (int32_t token : request.prompt) prompt_history_.add(token);
  }
  context_.assign(request.prompt.begin(), request.prompt.end());
  context_.reserve(n_prompt + request.max_tokens);
  if (drafter_) drafter_->reset();
  DraftLengthPolicy policy = learned_->next_request();
  stats.drafted_at.assign(model_.limits().max_logit_rows, 0);
  stats.accepted_at.assign(model_.limits().max_logit_rows, 0);

  // Emits tokens in order; returns false when generation must end.
  auto emit = [&](int32_t token) {
    result.tokens.push_back(token);
    context_.push_back(token);
    bool keep_going = !on_token || on_token(token);
    if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(), token) !=
        request.stop_tokens.end()) {
      result.finish_reason = "stop";
      return false;
    }
    return keep_going && static_cast<int>(result.tokens.size()) < request.max_tokens;
  };

  const double start = now_seconds();
  Tensor logits = prefill(request.prompt);
  // The draft model reads the prompt as part of prompt processing, not in the first round (on
  // another device, while the target's prefill runs).
  if (drafter_ && request.max_tokens > 1) drafter_->prefill(request.prompt);
  // The first token comes from the prompt's last row: a verification of an empty draft. Fetching
  // that row waits for the device, so the prefill time includes all of its work.
  proposal_.clear();
  proposal_.verify_device = model_.backend().device();
  fetch_for_verify(logits, params, n_prompt);
  double t0 = now_seconds();
  stats.prefill_seconds = t0 - start;
  verify_fetched(params, n_prompt);
  double decode_start = now_seconds();
  stats.sample_seconds += decode_start - t0;
  bool running = emit(verdict_.emitted[0]);
  if (running && queues_plain(params)) {
    decode_queued(request.max_tokens - static_cast<int>(result.tokens.size()), params, emit, stats);
    running = false;
  }

  // Verification reads drafts on the device where it chooses tokens there; then a drafter that
  // chains its steps on this device need not wait for its tokens before verification is queued.
  Backend& backend = model_.backend();
  const bool device_tokens_ok =
      !params.has_penalties() && (params.greedy() || backend.samples_on_device());
  last_round_.pending = false;
  while (running) {
    // context_ = committed tokens; the last one is not in the target cache yet.
    const int n = static_cast<int>(context_.size());
    const int remaining = request.max_tokens - static_cast<int>(result.tokens.size());
    int k = drafter_ ? policy.choose() : 0;
    k = std::min({k, remaining - 1, capacity - n});
    proposal_.clear();
    proposal_.device_tokens_ok = device_tokens_ok;
    const uint64_t draft_start = backend.mark();
    if (k > 0) drafter_->propose(context_, k, params, proposal_);
    const int drafted = proposal_.size();

    rows_[0] = context_.back();
    std::copy(proposal_.tokens.begin(), proposal_.tokens.end(), rows_.begin() + 1);
    std::iota(positions_.begin(), positions_.begin() + drafted + 1, n - 1);
    // The draft's queued work first; its end is verification's start.
    if (proposal_.queued_on != nullptr) backend.wait_for(*proposal_.queued_on);
    const uint64_t verify_start = backend.mark();
    ForwardBatch batch{drafted + 1, rows_.data(), positions_.data(), slots_.data()};
    if (proposal_.device_tokens != nullptr) {  // the drafts are still on the device
      batch.device_tokens = proposal_.device_tokens;
      batch.device_tokens_from = 1;
    }
    logits = model_.forward(batch, kv_);
    record_last_round(policy, stats);  // while this verification runs
    fetch_for_verify(logits, params, n);
    double t_sample = now_seconds();
    verify_fetched(params, n);
    double t_done = now_seconds();

    const int accepted = verdict_.accepted;
    kv_.set_length(slot_, n + accepted);  // the pending token and the accepted drafts
    stats.rounds += 1;
    stats.drafted += drafted;
    stats.accepted += accepted;
    for (int i = 1; i <= drafted; ++i) {
      stats.drafted_at[i] += 1;
      if (i <= accepted) stats.accepted_at[i] += 1;
    }
    stats.sample_seconds += t_done - t_sample;
    last_round_ = {
        true, draft_start, verify_start, verify_end_, drafted, accepted, proposal_.prefill_seconds};
    for (int32_t token : verdict_.emitted) {
      running = emit(token);
      if (!running) break;
    }
  }
  record_last_round(policy, stats);
  *learned_ = policy;
  stats.generated_tokens = static_cast<int>(result.tokens.size());
  stats.decode_seconds = now_seconds() - decode_start;
  return result;
}

}  // namespace specd
