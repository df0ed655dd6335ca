// A separate, smaller draft model with its own KV cache, kept in sync with the context.
#pragma once

#include <vector>

#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "sample/sampler.h"
#include "spec/drafter.h"

namespace specd {

class ModelDrafter final : public Drafter {
 public:
  // `target_vocab` is the vocabulary the proposals live in (draft logits beyond it are
  // ignored). `p_min`: stop drafting when the draft's top probability falls below it.
  ModelDrafter(Transformer& model, KvCache& kv, int target_vocab, int max_k, double p_min);
  std::string name() const override { return "draft"; }
  void reset() override;
  void warm_up() override;
  void prefill(std::span<const int32_t> prompt) override;
  void propose(std::span<const int32_t> context, int max_k, const SamplingParams& params,
               DraftProposal& out) override;
  bool uses_model() const override { return true; }
  void device_tokens_read(std::span<const int32_t> tokens) override;

 private:
  // Rolls the cache back to the common prefix of `cached_` and `context`, then runs the rest of
  // the context through the draft; returns the last row's logits. Sets *prefill_seconds to the
  // time of prefilling a fresh context (0 when there was none).
  Tensor catch_up(std::span<const int32_t> context, double* prefill_seconds);
  // Runs context[begin, end) through the draft in forwards of at most `chunk` rows, appending
  // the tokens to `cached_`; returns the logits of the last row when `logits_of_last`.
  Tensor forward_rows(std::span<const int32_t> context, size_t begin, size_t end, size_t chunk,
                      bool logits_of_last);
  // The draft steps where tokens are chosen on the device (greedy, or sampled with q left in
  // `q_rows`): each step's token feeds the next forward there, and the host waits once, for all
  // max_k tokens (at most kSmallBatch), or not at all when they may stay on the device.
  void propose_on_device(Tensor logits, int max_k, const SamplingParams& params, int64_t position,
                         const Tensor& q_rows, DraftProposal& out);
  // The draft steps that choose tokens on the host from each step's logits row.
  void propose_on_host(Tensor logits, int max_k, const SamplingParams& params, int64_t position,
                       DraftProposal& out);
  // Picks the next draft token from `logits`; writes q into `probs` ([vocab]) when sampling.
  int32_t choose(const float* logits, const SamplingParams& params, int64_t position, float* probs,
                 float* top_prob);

  Transformer& model_;
  KvCache& kv_;
  int target_vocab_;
  int usable_vocab_;  // min(target vocab, draft vocab)
  double p_min_;
  Sampler sampler_;
  std::vector<int32_t> cached_;  // tokens whose K/V are in the draft cache, in order
  // Tokens after cached_ whose K/V are in the cache but whose values stayed on the device (the
  // first unread_ of the last proposal's device tokens).
  int unread_ = 0;
  std::vector<int32_t> positions_;  // [max_rows] scratch
  std::vector<float> logits_;       // [draft vocab] host copy
  std::vector<float> scratch_;      // [target vocab] probabilities
  DeviceBuffer chain_;              // [kSmallBatch] i32 on the draft's device: drafts chosen there
  DeviceBuffer q_rows_;  // [max_k, target vocab] f32 on a sampling device: q of sampled drafts
  int max_k_;
};

}  // namespace specd
