// The continuous-batching loop: admit, prefill one chunk, then one speculative round for every
// decoding sequence, packing their verify rows into forwards of at most kSmallBatch rows.
#include "engine/batch_engine.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "sample/philox.h"
#include "sample/sampler.h"

namespace specd {

struct BatchEngine::Sequence {
  Sequence(int slot_index, int vocab, std::unique_ptr<Drafter> d)
      : slot(slot_index), drafter(std::move(d)), prompt_history(vocab), output_history(vocab) {}
  int slot;
  std::unique_ptr<Drafter> drafter;
  std::shared_ptr<BatchRequest> request;  // nullptr: the slot is free
  uint64_t order = 0;                     // admission order (fairness)
  int prefilled = 0;                      // prompt tokens already in the cache
  bool decoding = false;
  std::optional<DraftLengthPolicy> policy;
  TokenHistory prompt_history, output_history;
  std::vector<int32_t> context;  // prompt + emitted tokens
  DraftProposal proposal;
  VerifyResult verdict;
  GenerationResult result;
  double start = 0, decode_start = 0;
  int row_offset = 0;  // first row of this sequence in the current forward
};

BatchEngine::BatchEngine(Transformer& model, KvCache& kv, const BatchEngineOptions& options,
                         const std::function<std::unique_ptr<Drafter>()>& make_drafter)
    : model_(model),
      kv_(kv),
      options_(options),
      vocab_(model.config().vocab_size),
      verifier_(model.config().vocab_size) {
  SPECD_CHECK(options.parallel >= 1, "--parallel must be at least 1");
  SPECD_CHECK(kv.shape().n_slots >= options.parallel, "the KV cache has {} slots for {} sequences",
              kv.shape().n_slots, options.parallel);
  const int logit_rows = model.limits().max_logit_rows;
  options_.max_rows_per_forward =
      std::clamp(options_.max_rows_per_forward, 1, std::min(logit_rows, model.limits().max_rows));
  if (options_.sampled_draft_k <= 0) {
    options_.sampled_draft_k = std::min(4, options_.draft_length.max_k);
  }
  const int k_limit = options_.max_rows_per_forward - 1;
  options_.draft_length.max_k = std::min(options_.draft_length.max_k, k_limit);
  options_.draft_length.min_k = std::min(options_.draft_length.min_k, options_.draft_length.max_k);
  options_.draft_length.fixed_k = std::min(options_.draft_length.fixed_k, k_limit);
  options_.sampled_draft_k = std::min(options_.sampled_draft_k, k_limit);
  learned_.emplace(options_.draft_length);
  SPECD_CHECK(
      !options.prefix_cache || options.prefix_cache->block_tokens() == model.limits().max_rows,
      "prefix cache blocks ({} tokens) must equal the prefill chunk ({} rows)",
      options.prefix_cache ? options.prefix_cache->block_tokens() : 0, model.limits().max_rows);
  for (int s = 0; s < options.parallel; ++s) {
    auto seq = std::make_unique<Sequence>(s, vocab_, make_drafter ? make_drafter() : nullptr);
    seq->proposal.tokens.reserve(logit_rows);
    seq->proposal.verify_device = model.backend().device();
    seq->verdict.emitted.reserve(logit_rows + 1);
    slots_.push_back(std::move(seq));
  }
  logits_.resize(static_cast<size_t>(logit_rows) * vocab_);
  ids_buffer_ = model.backend().alloc(static_cast<size_t>(logit_rows) * sizeof(int32_t));
  ids_.resize(logit_rows);
  row_sampling_.resize(logit_rows);
  u_accept_.resize(logit_rows);
  u_resample_.resize(logit_rows);
  rows_.resize(logit_rows);
  positions_.resize(std::max(logit_rows, model.limits().max_rows));
  row_slots_.resize(std::max(logit_rows, model.limits().max_rows));
  ranked_.reserve(vocab_);
}

BatchEngine::~BatchEngine() { stop(); }

void BatchEngine::submit(std::shared_ptr<BatchRequest> request) {
  const GenerateRequest& g = request->generate;
  validate_sampling_params(g.sampling);
  const int n = static_cast<int>(g.prompt.size());
  SPECD_CHECK(n > 0, "the prompt is empty");
  SPECD_CHECK(g.max_tokens >= 1, "max_tokens must be at least 1");
  for (int32_t token : g.prompt) {
    SPECD_CHECK(token >= 0 && token < vocab_, "prompt token {} is outside the vocabulary of {}",
                token, vocab_);
  }
  const int capacity = kv_.shape().capacity;
  SPECD_CHECK(static_cast<int64_t>(n) + g.max_tokens <= capacity,
              "the prompt ({} tokens) plus max_tokens ({}) exceed the context size ({})", n,
              g.max_tokens, capacity);
  SPECD_CHECK(request->top_logprobs <= 20, "top_logprobs must be at most 20");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SPECD_CHECK(!stopping_, "the engine is shutting down");
    waiting_.push_back(std::move(request));
  }
  wake_.notify_one();
}

void BatchEngine::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void BatchEngine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& seq : slots_) {
    if (seq->request) finish(*seq, "cancelled");
  }
  std::deque<std::shared_ptr<BatchRequest>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(waiting_);
  }
  for (auto& request : left) {
    GenerationResult result;
    result.finish_reason = "cancelled";
    if (request->on_done) request->on_done(result);
  }
}

BatchEngineSnapshot BatchEngine::snapshot() const {
  BatchEngineSnapshot s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s.waiting = static_cast<int>(waiting_.size());
  }
  s.active = active_.load();
  s.kv_used = kv_used_.load();
  s.kv_capacity = static_cast<int64_t>(options_.parallel) * kv_.shape().capacity;
  s.prefix_cache_bytes = prefix_bytes_.load();
  s.prefix_cache_hit_tokens = prefix_hits_.load();
  return s;
}

void BatchEngine::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || active_.load() > 0; });
      if (stopping_) return;
    }
    try {
      step();
    } catch (const std::exception& e) {
      // A failed forward must not take the server down: end every active sequence.
      SPECD_LOG_WARN("engine step failed: {}", e.what());
      for (auto& seq : slots_) {
        if (seq->request) finish(*seq, std::string("error: ") + e.what());
      }
    }
  }
}

void BatchEngine::admit() {
  std::vector<std::shared_ptr<BatchRequest>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& seq : slots_) {
      while (!seq->request && !waiting_.empty()) {
        std::shared_ptr<BatchRequest> request = std::move(waiting_.front());
        waiting_.pop_front();
        if (request->cancelled.load()) {
          dropped.push_back(std::move(request));
          continue;
        }
        Sequence& s = *seq;
        const GenerateRequest& g = request->generate;
        s.request = std::move(request);
        s.order = admissions_++;
        s.prefilled = 0;
        s.decoding = false;
        s.policy.emplace(learned_->next_request());
        s.prompt_history.clear();
        s.output_history.clear();
        if (g.sampling.repetition_penalty != 1.0) {
          for (int32_t token : g.prompt) s.prompt_history.add(token);
        }
        s.context.assign(g.prompt.begin(), g.prompt.end());
        s.result = GenerationResult{};
        s.result.finish_reason = "length";
        s.result.stats.prompt_tokens = static_cast<int>(g.prompt.size());
        s.result.stats.drafted_at.assign(model_.limits().max_logit_rows, 0);
        s.result.stats.accepted_at.assign(model_.limits().max_logit_rows, 0);
        s.start = now_seconds();
        if (s.drafter) s.drafter->reset();
        if (options_.draft_model) options_.draft_model->reset(s.slot);
        if (options_.prefix_cache) {
          const int n = static_cast<int>(g.prompt.size());
          const int block = options_.prefix_cache->block_tokens();
          s.prefilled = options_.prefix_cache->restore(s.slot, g.prompt, (n - 1) / block);
          s.result.stats.cached_prompt_tokens = s.prefilled;
        }
        kv_.truncate(s.slot, 0);
        active_.fetch_add(1);
      }
    }
  }
  for (auto& request : dropped) {
    GenerationResult result;
    result.finish_reason = "cancelled";
    if (request->on_done) request->on_done(result);
  }
}

bool BatchEngine::step() {
  admit();
  for (auto& seq : slots_) {
    if (seq->request && seq->request->cancelled.load()) finish(*seq, "cancelled");
  }
  // One prefill chunk of the earliest admitted sequence still prefilling, then one round for
  // every decoding sequence, so new requests start while others keep decoding.
  Sequence* prefilling = nullptr;
  std::vector<Sequence*> decoding;
  for (auto& seq : slots_) {
    if (!seq->request) continue;
    if (seq->decoding) {
      decoding.push_back(seq.get());
    } else if (!prefilling || seq->order < prefilling->order) {
      prefilling = seq.get();
    }
  }
  if (!prefilling && decoding.empty()) return false;
  std::sort(decoding.begin(), decoding.end(),
            [](const Sequence* a, const Sequence* b) { return a->order < b->order; });
  if (prefilling) prefill_chunk(*prefilling);
  if (!decoding.empty()) decode_round(decoding);
  int64_t used = 0;
  for (auto& seq : slots_) used += seq->request ? kv_.length(seq->slot) : 0;
  kv_used_.store(used);
  if (options_.prefix_cache) {
    prefix_bytes_.store(static_cast<int64_t>(options_.prefix_cache->bytes()));
    prefix_hits_.store(options_.prefix_cache->hit_tokens());
  }
  return true;
}

void BatchEngine::warm_up() {
  SPECD_CHECK(!thread_.joinable(), "warm_up runs before start()");
  std::vector<ForwardShape> shapes;  // decode and verification forwards
  for (int rows = options_.max_rows_per_forward; rows >= 1; --rows) shapes.push_back({rows, -1});
  const bool records = model_.backend().records_forwards();
  for (int run = 0; run < 2; ++run) {  // the second run records
    if (records) model_.run_shapes(shapes, kv_, slots_[0]->slot);
    if (options_.draft_model) options_.draft_model->warm_up();
    for (auto& seq : slots_) {
      if (seq->drafter) seq->drafter->warm_up();
    }
  }
}

void BatchEngine::prefill_chunk(Sequence& seq) {
  // The same chunks as Generator::prefill, so the cache and first token match `generate`.
  const std::vector<int32_t>& prompt = seq.request->generate.prompt;
  const int n = static_cast<int>(prompt.size());
  const int begin = seq.prefilled;
  const int rows = std::min(model_.limits().max_rows, n - begin);
  std::iota(positions_.begin(), positions_.begin() + rows, begin);
  std::fill(row_slots_.begin(), row_slots_.begin() + rows, seq.slot);
  ForwardBatch batch{rows, prompt.data() + begin, positions_.data(), row_slots_.data()};
  int32_t last_row = rows - 1;
  batch.logit_rows = &last_row;
  batch.n_logit_rows = begin + rows == n ? 1 : 0;
  Tensor logits = model_.forward(batch, kv_);
  if (options_.prefix_cache && rows == options_.prefix_cache->block_tokens() && begin + rows < n) {
    options_.prefix_cache->store(seq.slot, prompt, begin / rows);
  }
  seq.prefilled += rows;
  if (seq.prefilled < n) return;
  kv_.set_length(seq.slot, n);
  GenerationStats& stats = seq.result.stats;
  // Fetching the last row waits for the device: the prefill time includes all of its work.
  model_.backend().copy_to_host(logits_.data(), logits.data, vocab_ * sizeof(float));
  double t0 = now_seconds();
  stats.prefill_seconds = t0 - seq.start;
  seq.proposal.tokens.clear();
  const GenerateRequest& g = seq.request->generate;
  verifier_.verify(logits_.data(), seq.proposal, g.sampling, n, seq.prompt_history,
                   seq.output_history, seq.verdict);
  seq.decode_start = now_seconds();
  stats.sample_seconds += seq.decode_start - t0;
  seq.decoding = true;
  if (!emit(seq, seq.verdict.emitted[0], logits_.data())) finish(seq, seq.result.finish_reason);
}

void BatchEngine::decode_round(std::vector<Sequence*>& batch) {
  const int max_rows = options_.max_rows_per_forward;
  const int capacity = kv_.shape().capacity;
  std::vector<Sequence*> group;
  group.reserve(batch.size());
  int used = 0;
  auto run_group = [&] {
    if (group.empty()) return;
    double t0 = now_seconds();
    ForwardBatch forward{used, rows_.data(), positions_.data(), row_slots_.data()};
    Tensor logits = model_.forward(forward, kv_);
    Backend& backend = model_.backend();
    // Each sequence takes the same path whatever shares its group: a token id chosen on the
    // device unless it needs its logits rows itself (penalties, logprobs, or sampled proposals
    // to verify on the host); the device's draws and the host sampler's need not agree bit for
    // bit, so one sequence must never switch between them because of its neighbours.
    const bool any_host = std::any_of(group.begin(), group.end(),
                                      [](const Sequence* seq) { return needs_logits(*seq); });
    const bool all_host = std::all_of(group.begin(), group.end(),
                                      [](const Sequence* seq) { return needs_logits(*seq); });
    bool device_ids = !all_host;
    if (device_ids) {
      Tensor ids = ids_buffer_.view(DType::kI32, 1, logits.rows);
      const bool greedy = std::all_of(group.begin(), group.end(), [](const Sequence* seq) {
        return seq->request->generate.sampling.greedy();
      });
      if (greedy) {
        backend.argmax_rows(logits, ids);
      } else {
        device_ids = backend.sample_rows(logits, plain_draws(group, logits.rows), ids, nullptr);
      }
      for (Sequence* seq : group) {
        if (seq->proposal.device_probs.data == nullptr) continue;
        SPECD_CHECK(device_ids && verify_on_device(*seq, logits, ids),
                    "sampled drafts left on the device need device-side verification");
      }
      if (device_ids) backend.copy_to_host(ids_.data(), ids.data, ids.bytes());
    }
    const bool host_logits = any_host || !device_ids;
    if (host_logits) backend.copy_to_host(logits_.data(), logits.data, logits.bytes());
    // The forward's time is shared by its sequences, as the draft time is (each is charged its
    // share), so a sequence's draft-length policy weighs both at the same scale.
    const double seconds = (now_seconds() - t0) / static_cast<double>(group.size());
    for (Sequence* seq : group) {
      const size_t row = static_cast<size_t>(seq->row_offset);
      const bool own_logits = !device_ids || needs_logits(*seq);
      verify_rows(*seq, own_logits ? logits_.data() + row * vocab_ : nullptr,
                  own_logits ? nullptr : ids_.data() + row, seconds);
    }
    group.clear();
    used = 0;
  };
  // Draft lengths: a sampled request with model drafts uses the fixed length (its output
  // depends on the lengths); otherwise the sequence's policy, capped so that all sequences'
  // rows fit one forward (more forwards cost more than the extra drafts gain).
  const int row_budget_k = std::max(0, max_rows / static_cast<int>(batch.size()) - 1);
  BatchDraftModel* draft_model = options_.draft_model;
  draft_jobs_.clear();
  for (Sequence* seq : batch) {
    const GenerateRequest& g = seq->request->generate;
    const int n = static_cast<int>(seq->context.size());
    const int remaining = g.max_tokens - static_cast<int>(seq->result.tokens.size());
    const bool model_drafts = draft_model || (seq->drafter && seq->drafter->uses_model());
    int k = 0;
    if (seq->drafter || draft_model) {
      k = !g.sampling.greedy() && model_drafts
              ? options_.sampled_draft_k
              : std::min(seq->policy->choose(), batch.size() > 1 ? row_budget_k : max_rows);
    }
    k = std::min({k, remaining - 1, capacity - n, max_rows - 1});
    seq->proposal.clear();
    if (k > 0 && seq->drafter) seq->drafter->propose(seq->context, k, g.sampling, seq->proposal);
    if (k > 0 && seq->proposal.tokens.empty() && draft_model) {
      const bool device_verify = !g.sampling.has_penalties() && seq->request->top_logprobs < 0;
      draft_jobs_.push_back(
          {seq->slot, seq->context, k, &g.sampling, &seq->proposal, device_verify});
    }
  }
  if (!draft_jobs_.empty()) draft_model->propose(draft_jobs_);
  for (Sequence* seq : batch) {
    const int n = static_cast<int>(seq->context.size());
    const int drafted = static_cast<int>(seq->proposal.tokens.size());
    if (used + drafted + 1 > max_rows) run_group();
    seq->row_offset = used;
    rows_[used] = seq->context.back();
    std::copy(seq->proposal.tokens.begin(), seq->proposal.tokens.end(), rows_.begin() + used + 1);
    std::iota(positions_.begin() + used, positions_.begin() + used + drafted + 1, n - 1);
    std::fill(row_slots_.begin() + used, row_slots_.begin() + used + drafted + 1, seq->slot);
    used += drafted + 1;
    group.push_back(seq);
  }
  run_group();
}

bool BatchEngine::needs_logits(const Sequence& seq) {
  const BatchRequest& r = *seq.request;
  const bool host_q = !seq.proposal.tokens.empty() && seq.proposal.sampled &&
                      seq.proposal.device_probs.data == nullptr;
  return r.generate.sampling.has_penalties() || r.top_logprobs >= 0 ||
         (!r.generate.sampling.greedy() && host_q);
}

bool BatchEngine::verify_on_device(const Sequence& seq, const Tensor& logits, Tensor& ids) {
  RowSampling bonus;
  const SampledDraft draft = device_verify_inputs(seq.proposal, seq.request->generate.sampling,
                                                  static_cast<int64_t>(seq.context.size()),
                                                  u_accept_, u_resample_, &bonus);
  const int rows = static_cast<int>(draft.tokens.size()) + 1;
  Tensor rows_ids = ids;  // this sequence's k + 1 entries of the [1, rows] ids
  rows_ids.data = ids.row<int32_t>(0) + seq.row_offset;
  rows_ids.cols = rows_ids.stride = rows;
  return model_.backend().verify_sampled(logits.slice_rows(seq.row_offset, rows), bonus, draft,
                                         rows_ids);
}

std::span<const RowSampling> BatchEngine::plain_draws(const std::vector<Sequence*>& group,
                                                      int64_t rows) {
  for (const Sequence* seq : group) {
    const SamplingParams& p = seq->request->generate.sampling;
    const int64_t n = static_cast<int64_t>(seq->context.size());
    const int count = static_cast<int>(seq->proposal.tokens.size()) + 1;
    for (int i = 0; i < count; ++i) {  // row i: plain decoding's draw at position n + i
      row_sampling_[seq->row_offset + i] = device_draw(p, n + i, RandomPurpose::kSample);
    }
  }
  return {row_sampling_.data(), static_cast<size_t>(rows)};
}

void BatchEngine::verify_rows(Sequence& seq, const float* logits, const int32_t* targets,
                              double verify_seconds) {
  const GenerateRequest& g = seq.request->generate;
  const int n = static_cast<int>(seq.context.size());
  double t0 = now_seconds();
  if (targets != nullptr) {
    Verifier::verify_tokens(targets, seq.proposal, seq.output_history, seq.verdict);
  } else {
    verifier_.verify(logits, seq.proposal, g.sampling, n, seq.prompt_history, seq.output_history,
                     seq.verdict);
  }
  GenerationStats& stats = seq.result.stats;
  const int drafted = static_cast<int>(seq.proposal.tokens.size());
  const int accepted = seq.verdict.accepted;
  kv_.set_length(seq.slot, n + accepted);
  stats.rounds += 1;
  stats.drafted += drafted;
  stats.accepted += accepted;
  for (int i = 1; i <= drafted; ++i) {
    stats.drafted_at[i] += 1;
    if (i <= accepted) stats.accepted_at[i] += 1;
  }
  stats.draft_seconds += seq.proposal.seconds;
  stats.verify_seconds += verify_seconds;
  stats.sample_seconds += now_seconds() - t0;
  if (seq.drafter || options_.draft_model) {
    seq.policy->record(drafted, accepted, seq.proposal.seconds - seq.proposal.prefill_seconds,
                       drafted + 1, verify_seconds);
  }
  for (size_t i = 0; i < seq.verdict.emitted.size(); ++i) {
    if (!emit(seq, seq.verdict.emitted[i], logits != nullptr ? logits + i * vocab_ : nullptr)) {
      finish(seq, seq.result.finish_reason);
      return;
    }
  }
}

bool BatchEngine::emit(Sequence& seq, int32_t token, const float* logits_row) {
  BatchRequest& request = *seq.request;
  seq.result.tokens.push_back(token);
  seq.context.push_back(token);
  const TokenLogprob* logprob = nullptr;
  if (request.top_logprobs >= 0) {
    float max = *std::max_element(logits_row, logits_row + vocab_);
    double sum = 0;
    for (int t = 0; t < vocab_; ++t) sum += std::exp(static_cast<double>(logits_row[t]) - max);
    const float lse = max + static_cast<float>(std::log(sum));
    logprob_.token = token;
    logprob_.logprob = logits_row[token] - lse;
    logprob_.top.clear();
    const int top = std::min(request.top_logprobs, vocab_);
    if (top > 0) {
      ranked_.clear();
      for (int t = 0; t < vocab_; ++t) ranked_.emplace_back(logits_row[t], t);
      std::partial_sort(ranked_.begin(), ranked_.begin() + top, ranked_.end(),
                        [](const auto& a, const auto& b) {
                          return a.first > b.first || (a.first == b.first && a.second < b.second);
                        });
      for (int i = 0; i < top; ++i)
        logprob_.top.emplace_back(ranked_[i].second, ranked_[i].first - lse);
    }
    logprob = &logprob_;
  }
  const bool keep_going = !request.on_token || request.on_token(token, logprob);
  const std::vector<int>& stops = request.generate.stop_tokens;
  if (!keep_going || std::find(stops.begin(), stops.end(), token) != stops.end()) {
    seq.result.finish_reason = "stop";
    return false;
  }
  if (static_cast<int>(seq.result.tokens.size()) >= request.generate.max_tokens) {
    seq.result.finish_reason = "length";
    return false;
  }
  return true;
}

void BatchEngine::finish(Sequence& seq, const std::string& reason) {
  std::shared_ptr<BatchRequest> request = std::move(seq.request);
  seq.request.reset();
  seq.result.finish_reason = reason;
  if (seq.policy) learned_ = *seq.policy;
  GenerationStats& stats = seq.result.stats;
  stats.generated_tokens = static_cast<int>(seq.result.tokens.size());
  stats.decode_seconds = seq.decoding ? now_seconds() - seq.decode_start : 0;
  kv_.truncate(seq.slot, 0);
  active_.fetch_sub(1);
  if (request->on_done) {
    try {
      request->on_done(seq.result);
    } catch (const std::exception& e) {
      SPECD_LOG_WARN("request completion callback failed: {}", e.what());
    }
  }
}

}  // namespace specd
