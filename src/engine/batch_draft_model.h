// Draft-model proposals for many sequences at once: one draft KV slot per sequence, and each
// drafting step runs the rows of all sequences in one forward (batch-invariant up to
// kSmallBatch rows, so a sequence's proposals do not depend on the others).
#pragma once

#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "spec/drafter.h"

namespace specd {

class BatchDraftModel {
 public:
  // `kv` holds one slot per sequence (capacity >= target context + kSmallBatch). `target_vocab`
  // is the vocabulary proposals live in; `p_min` stops a chain when the draft's top
  // probability falls below it.
  BatchDraftModel(Transformer& model, KvCache& kv, int target_vocab, double p_min);

  struct Job {
    int slot = 0;
    std::span<const int32_t> context;  // prompt + committed tokens
    int max_k = 0;
    const SamplingParams* params = nullptr;
    DraftProposal* out = nullptr;
  };
  // Proposes up to max_k tokens for every job (a job per slot at most).
  void propose(std::vector<Job>& jobs);
  void reset(int slot);

 private:
  struct SlotState {
    std::vector<int32_t> cached;  // tokens whose K/V are in this slot, in order
    std::vector<float> logits;    // [draft vocab] the job's latest logits row
    int32_t argmax = -1;          // its argmax, when only that was read back (else -1)
    int64_t position = 0;         // position of the next draft token
    bool done = false;
  };
  // Rolls the slot back to its common prefix with the context, prefills a fresh context alone
  // (as ModelDrafter does) and returns the rows still to run (catch-up tokens).
  std::span<const int32_t> catch_up(const Job& job);
  // Runs rows[j] of jobs[j] (positions from first_position[j]) in forwards of at most
  // kSmallBatch rows, keeping each job's rows together when they fit; stores each job's
  // last-row logits in its slot state (or only their argmax, when `ids_only`).
  void run_rows(const std::vector<Job*>& jobs, const std::vector<std::span<const int32_t>>& rows,
                const std::vector<int32_t>& first_position, bool ids_only);
  int32_t choose(const SlotState& s, const SamplingParams& params, float* probs, float* top_prob);

  Transformer& model_;
  KvCache& kv_;
  int target_vocab_, usable_vocab_, draft_vocab_;
  double p_min_;
  Sampler sampler_;
  std::vector<SlotState> slots_;
  std::vector<int32_t> tokens_, positions_, row_slots_, logit_rows_;
  std::vector<float> host_logits_;  // [kSmallBatch, draft vocab]
  DeviceBuffer argmax_buffer_;      // [kSmallBatch] i32 on the draft model's device
  std::vector<int32_t> argmax_;     // [kSmallBatch] host copy
  std::vector<float> scratch_;      // [target vocab]
};

}  // namespace specd
