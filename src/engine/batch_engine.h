// Continuous batching: up to N sequences decode together, each with its own drafting state.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/batch_draft_model.h"
#include "engine/generation.h"
#include "engine/prefix_cache.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "spec/draft_length.h"
#include "spec/drafter.h"
#include "spec/verifier.h"

namespace specd {

// Log-probability of an emitted token under the target (raw logits, before penalties) and the
// most likely alternatives.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // [top_logprobs] (token, logprob), best first
};

// One request of the batch. Callbacks run on the engine thread and must not block for long.
struct BatchRequest {
  GenerateRequest generate;
  int top_logprobs = -1;  // < 0: no logprobs; otherwise alternatives per token (0..20)
  // Each emitted token, in order, with its logprob when asked for; return false to end the
  // generation there (finish reason "stop"), e.g. at a stop string.
  std::function<bool(int32_t token, const TokenLogprob* logprob)> on_token;
  // Once, at the end. finish_reason: "stop", "length", "cancelled" or "error: <message>".
  std::function<void(const GenerationResult& result)> on_done;
  std::atomic<bool> cancelled{false};  // set by any thread; the engine frees the slot
};

struct BatchEngineOptions {
  int parallel = 4;  // sequences decoded together (KV slots)
  DraftLengthOptions draft_length;
  // Sampled requests with a model drafter draft this many tokens every round (the adaptive
  // length depends on timings, and sampled drafts make the output depend on the lengths, so a
  // fixed length keeps a seed's output reproducible). 0: min(4, draft_length.max_k).
  int sampled_draft_k = 0;
  int max_rows_per_forward = kSmallBatch;  // decode/verify rows per target forward
  // Batched draft-model proposals (one draft KV slot per sequence), used when a sequence's own
  // drafter (if any, e.g. n-gram lookup) proposes nothing. Not owned; may be nullptr.
  BatchDraftModel* draft_model = nullptr;
  // Prompt KV reuse over whole prefill chunks (blocks of the model's max rows). Not owned.
  PrefixCache* prefix_cache = nullptr;
};

struct BatchEngineSnapshot {
  int waiting = 0;
  int active = 0;
  int64_t kv_used = 0;      // committed target KV entries over all slots
  int64_t kv_capacity = 0;  // slots x capacity
  int64_t prefix_cache_bytes = 0;
  int64_t prefix_cache_hit_tokens = 0;  // prompt tokens restored instead of prefilled
};

class BatchEngine {
 public:
  // `kv` must have options.parallel slots. `make_drafter` (may be empty) builds one drafter per
  // slot, once. The model and cache must outlive the engine.
  BatchEngine(Transformer& model, KvCache& kv, const BatchEngineOptions& options,
              const std::function<std::unique_ptr<Drafter>()>& make_drafter);
  ~BatchEngine();

  // Checks the request (throws specd::Error naming the problem) and queues it.
  void submit(std::shared_ptr<BatchRequest> request);
  // Runs the forwards decoding will use (target rows 1 to max rows per forward, and the draft
  // model's), twice, so that a backend that records forwards (CUDA graphs) has them recorded
  // before the first request. Call before start().
  void warm_up();
  // Starts the engine thread; stop() finishes in-flight requests as "cancelled" and joins.
  void start();
  void stop();
  BatchEngineSnapshot snapshot() const;
  // Runs one scheduling step on the caller's thread (tests); returns false when idle.
  bool step();

 private:
  struct Sequence;
  void run();
  void admit();
  void prefill_chunk(Sequence& seq);
  void decode_round(std::vector<Sequence*>& batch);
  // Verifies a sequence's rows from their host logits, or (targets != nullptr) from the token
  // the device chose for each row (Verifier::verify_tokens).
  void verify_rows(Sequence& seq, const float* logits, const int32_t* targets,
                   double verify_seconds);
  // True if the request needs its rows' logits on the host (penalties, logprobs, or sampling
  // with sampled proposals whose q is on the host); otherwise a token per row chosen on the
  // device is enough.
  static bool needs_logits(const Sequence& seq);
  // Speculative sampling of the sequence's sampled proposals (q on the device) from its rows of
  // `logits`, into its entries of `ids` ([1, rows] i32). False on a backend without the op.
  bool verify_on_device(const Sequence& seq, const Tensor& logits, Tensor& ids);
  // Each row's RowSampling for Backend::sample_rows: plain decoding's draw at the row's position.
  std::span<const RowSampling> plain_draws(const std::vector<Sequence*>& group, int64_t rows);
  // logits_row: the row that chose `token`, read only for logprobs (else may be nullptr).
  bool emit(Sequence& seq, int32_t token, const float* logits_row);
  void finish(Sequence& seq, const std::string& reason);

  Transformer& model_;
  KvCache& kv_;
  BatchEngineOptions options_;
  // What the sequences' draft-length policies learned (costs, acceptance): each new sequence
  // starts from the last finished one's.
  std::optional<DraftLengthPolicy> learned_;
  int vocab_;
  Verifier verifier_;
  std::vector<std::unique_ptr<Sequence>> slots_;
  std::vector<float> logits_;                  // [max logit rows, vocab] host copy
  DeviceBuffer ids_buffer_;                    // [max logit rows] i32 on the model's device
  std::vector<int32_t> ids_;                   // [max logit rows] host copy
  std::vector<RowSampling> row_sampling_;      // [max logit rows]
  std::vector<double> u_accept_, u_resample_;  // [max logit rows] uniforms of sampled drafts
  std::vector<int32_t> rows_, positions_, row_slots_;
  std::vector<std::pair<float, int32_t>> ranked_;  // logprob scratch
  TokenLogprob logprob_;
  std::vector<BatchDraftModel::Job> draft_jobs_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<BatchRequest>> waiting_;
  std::atomic<int> active_{0};
  std::atomic<int64_t> kv_used_{0};
  std::atomic<int64_t> prefix_bytes_{0}, prefix_hits_{0};
  bool stopping_ = false;
  std::thread thread_;
  uint64_t admissions_ = 0;
};

}  // namespace specd
