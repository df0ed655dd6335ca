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
    // Whether the target can verify sampled proposals on its device (no penalties, no
    // logprobs): they are then drawn on the draft's device, where q stays, when that is the
    // verifying device (out->verify_device).
    bool device_verify = false;
  };
  // Proposes up to max_k tokens for every job (a job per slot at most). Each job takes one path,
  // whatever the others do: greedy tokens are the argmax on the draft's device; sampled ones
  // are drawn there (q left in out->device_probs) or, without device verification, on the host
  // from the copied logits (q in out->probs); a probability cut (p_min) reads logits on the host.
  void propose(std::vector<Job>& jobs);
  void reset(int slot);
  // Runs each forward shape proposing may use once: rows 1 to kSmallBatch with the last row of
  // 1 to n_slots sequences picked (see Transformer::run_shapes), on slot 0, which it resets.
  void warm_up();

 private:
  // How a job's tokens are chosen (see propose).
  enum class Path { kHostLogits, kDeviceArgmax, kDeviceDraw };
  struct SlotState {
    std::vector<int32_t> cached;  // tokens whose K/V are in this slot, in order
    std::vector<float> logits;    // [draft vocab] the job's latest logits row (kHostLogits)
    int32_t chosen = -1;          // the token chosen on the device (else -1)
    int64_t position = 0;         // position of the next draft token
    Path path = Path::kHostLogits;
    int draft_index = 0;  // index of the token being chosen in the job's proposal
    DeviceBuffer q;       // [q_rows, target vocab] f32 q of device draws
    int q_rows = 0;
  };
  // Rolls the slot back to its common prefix with the context, prefills a fresh context of more
  // than kSmallBatch tokens alone, and returns the rows still to run (catch-up tokens, packed
  // with the other sequences' rows).
  std::span<const int32_t> catch_up(const Job& job);
  // Runs rows[j] of jobs[j] (positions from first_position[j]) in forwards of at most
  // kSmallBatch rows, keeping each job's rows together when they fit; stores each job's
  // last-row logits in its slot state, or the token its path chose on the device.
  void run_rows(const std::vector<Job*>& jobs, const std::vector<std::span<const int32_t>>& rows,
                const std::vector<int32_t>& first_position);
  // The logits of one forward (row i: the last row of jobs[logit_of[i]]) to each job's state.
  void take_logits(const Tensor& logits, const std::vector<Job*>& jobs,
                   const std::vector<size_t>& logit_of);
  Path path_of(const Job& job) const;
  int32_t choose(const SlotState& s, const SamplingParams& params, float* probs, float* top_prob);

  Transformer& model_;
  KvCache& kv_;
  int target_vocab_, usable_vocab_, draft_vocab_;
  double p_min_;
  Sampler sampler_;
  std::vector<SlotState> slots_;
  std::vector<int32_t> tokens_, positions_, row_slots_, logit_rows_;
  std::vector<float> host_logits_;  // [kSmallBatch, draft vocab]
  DeviceBuffer ids_buffer_;         // [2, kSmallBatch] i32: argmax ids, then drawn ids
  std::vector<int32_t> ids_;        // its host copy
  DeviceBuffer draw_probs_;         // [kSmallBatch, target vocab] f32: q of device draws
  std::vector<RowSampling> draws_;  // [kSmallBatch]
  std::vector<float> scratch_;      // [target vocab]
};

}  // namespace specd
