// Generation for one sequence: chunked prefill, then rounds of draft → verify → accept.
// Without a drafter each round verifies an empty draft, which is plain autoregressive decoding.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/generation.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "spec/draft_length.h"
#include "spec/drafter.h"
#include "spec/verifier.h"

namespace specd {

class Generator {
 public:
  // Uses slot `slot` of `kv`; the cache must hold prompt + max_tokens entries. `drafter` may be
  // nullptr (plain decoding); it must outlive the generator.
  Generator(Transformer& model, KvCache& kv, Drafter* drafter = nullptr,
            DraftLengthOptions draft_length = {}, int slot = 0);

  // Called with each new token as soon as it is final; return false to stop early.
  using TokenCallback = std::function<bool(int32_t)>;
  GenerationResult generate(const GenerateRequest& request, const TokenCallback& on_token = {});

  // Runs the forwards decoding with this drafter and draft length will use, twice, so that a
  // backend that records forwards (CUDA graphs) has recorded them before the first request
  // instead of inside its decode. The slot must be free. Does nothing on other backends.
  void warm_up();

  // Plain decoding (no drafter, no penalties, tokens chosen on the device) queues each forward
  // before the host has read the token of the one before: the device feeds that token in, and
  // the host's wait overlaps the next forward. On by default where the backend queues work
  // (Backend::queues_work); a stop token then leaves one forward's work unused.
  void set_queued_decoding(bool on) { queued_ = on; }

  // What the draft-length policy learned in this generator's requests (costs, acceptance): each
  // request starts from it and leaves what it learned there. Generators of the same drafter,
  // target and draft-length options may share it, so that a new generator starts informed.
  const std::shared_ptr<DraftLengthPolicy>& draft_lengths() const { return learned_; }
  void share_draft_lengths(std::shared_ptr<DraftLengthPolicy> learned) {
    learned_ = std::move(learned);
  }

  // Runs the prompt through the model into the cache (chunks of the model's max rows) and
  // returns the last row's logits. Sets the slot's KV length to the prompt length.
  Tensor prefill(const std::vector<int32_t>& prompt);

 private:
  // Copies what verification of `logits` ([rows, vocab] on the model's device; row i at
  // `position` + i) needs to the host, waiting for the forward: one token id per row, chosen on
  // the device, when no penalties apply (the argmax when greedy; plain decoding's own draw for
  // point-mass proposals; speculative sampling for sampled drafts whose q is on this device),
  // where the backend samples; else the logit rows. Draft tokens left on the device come in the
  // same download, into proposal_.tokens.
  void fetch_for_verify(const Tensor& logits, const SamplingParams& params, int64_t position);
  void verify_fetched(const SamplingParams& params, int64_t position);
  // Adds the last round's device times (Backend marks) to `stats` and `policy`. Read one round
  // late, while the device runs the next verification, so that reading them never holds it up.
  void record_last_round(DraftLengthPolicy& policy, GenerationStats& stats);
  bool queues_plain(const SamplingParams& params) const;
  // The rest of a plain decode with queued forwards: up to `remaining` tokens after context_,
  // each passed to `emit` until it returns false.
  void decode_queued(int remaining, const SamplingParams& params,
                     const std::function<bool(int32_t)>& emit, GenerationStats& stats);

  Transformer& model_;
  KvCache& kv_;
  Drafter* drafter_;
  DraftLengthOptions draft_length_;
  std::shared_ptr<DraftLengthPolicy> learned_;
  int slot_;
  bool queued_;
  Verifier verifier_;
  TokenHistory prompt_history_;
  TokenHistory output_history_;
  DraftProposal proposal_;
  VerifyResult verdict_;
  std::vector<int32_t> context_;  // prompt + emitted tokens
  std::vector<float> logits_;     // [max_logit_rows, vocab] host copy
  bool fetched_ids_ = false;      // the last fetch copied token ids, not logits
  // [2 * max_logit_rows] i32 on the model's device: a fetch's ids, then drafts left there
  DeviceBuffer ids_buffer_;
  std::vector<int32_t> ids_;  // [2 * max_logit_rows] host copy
  uint64_t verify_end_ = 0;   // Backend::mark after the last fetch's ops
  struct RoundMarks {         // a round whose times record_last_round has not read yet
    bool pending = false;
    uint64_t draft_start = 0, verify_start = 0, verify_end = 0;
    int drafted = 0, accepted = 0;
    double prefill_seconds = 0;
  };
  RoundMarks last_round_;
  std::vector<RowSampling> row_sampling_;      // [max_logit_rows]
  std::vector<double> u_accept_, u_resample_;  // [max_logit_rows] uniforms of sampled drafts
  std::vector<int32_t> rows_;                  // [max_rows] tokens of one forward
  std::vector<int32_t> positions_;             // [max_rows]
  std::vector<int32_t> slots_;                 // [max_rows]
};

}  // namespace specd
