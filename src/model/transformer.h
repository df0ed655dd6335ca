// The decoder-only transformer forward (Llama, Qwen2, Qwen3, Mistral, Gemma 3), written against
// Backend.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "io/tensor_store.h"
#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace specd {

// The rows of one forward. All arrays are host memory of n_rows entries.
struct ForwardBatch {
  int n_rows = 0;
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;    // RoPE positions
  const int32_t* slots = nullptr;        // KV cache slot per row (nullptr = all slot 0)
  const int32_t* cache_index = nullptr;  // KV entry per row (nullptr = the position)
  // Rows whose logits are wanted, in output order (nullptr with n_logit_rows == n_rows = all).
  const int32_t* logit_rows = nullptr;
  int n_logit_rows = 0;
  // Token ids on the model's device for rows [device_tokens_from, n_rows) (device_tokens[0] is
  // row device_tokens_from's), in place of `tokens` there: for example the argmax of the forward
  // before, or a draft's chain, so the host need not wait for them. `tokens` gives the rows
  // before. The host cannot check them: ops skip rows whose token is outside the vocabulary.
  const int32_t* device_tokens = nullptr;
  int device_tokens_from = 0;
};

// The shape of a forward that decoding will run: its row count and how many of its last rows'
// logits are picked (-1: every row's logits, without a pick list).
struct ForwardShape {
  int rows = 1;
  int picked_logit_rows = -1;
};

struct TransformerLimits {
  int max_rows = 512;  // rows per forward; longer prompts are prefilled in chunks
  int max_logit_rows = kSmallBatch;
  int max_positions = 4096;  // RoPE table size (>= the KV cache capacity)
};

class Transformer {
 public:
  // `store` must outlive the transformer (a CPU backend with map_weights reads weights from it).
  // `quant` quantises the weights at load (see WeightQuantOptions).
  Transformer(Backend& backend, ModelConfig config, const TensorStore& store,
              const TransformerLimits& limits, const WeightQuantOptions& quant = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const TransformerLimits& limits() const { return limits_; }
  Backend& backend() { return backend_; }

  // Asks for the residual stream after these layers (0 = embeddings, i = after layer i).
  void set_hidden_capture(std::vector<int> layers);
  const std::vector<int>& hidden_capture() const { return capture_layers_; }

  // Runs the rows, writing their K/V into `kv` and returning logits [n_logit_rows, vocab] f32
  // (device memory, valid until the next forward). Captured hidden states, if requested, are
  // in hidden(i) as [n_rows, hidden] f32. Does not change kv lengths.
  Tensor forward(const ForwardBatch& batch, KvCache& kv);
  Tensor hidden(size_t capture_index) const;

  // Runs a prompt chunk, then one forward of each shape, on slot `slot` of `kv` (token 0 at
  // positions 0, 1, ...), so that a backend that records forwards (Backend::records_forwards)
  // records each shape on its second run, before decoding needs it. Shapes longer than the cache
  // are skipped. The slot must be free: its entries are overwritten and its length is left at 0.
  void run_shapes(std::span<const ForwardShape> shapes, KvCache& kv, int slot = 0);

 private:
  Backend& backend_;
  ModelConfig config_;
  TransformerLimits limits_;
  ModelWeights weights_;
  RopeTable rope_;        // global layers
  RopeTable rope_local_;  // Gemma 3 sliding-window layers (rope_local_theta), or empty
  DeviceBuffer rope_storage_;
  std::vector<int> capture_layers_;
  int last_rows_ = 0;
  // Key of a small forward's recorded op sequence (see Backend::run_recorded).
  uint64_t recording_key(const ForwardBatch& batch, const KvCache& kv) const;

  // Scratch, sized once for max_rows (no allocation per forward).
  std::vector<int32_t> zero_slots_;  // [max_rows] host zeros for single-sequence batches
  std::vector<int32_t> staged_;  // [4 * max_rows + max_logit_rows] host copy of the index arrays
  // [4 * max_rows + max_logit_rows] i32: tokens, positions, slots, cache_index (m each), then the
  // picked logit rows
  DeviceBuffer indices_;
  DeviceBuffer x_, h_, q_, k_, v_, attn_, gate_, up_, normed_, logits_, captured_;
  DeviceBuffer norm_sums_;  // [max_rows, ceil(hidden / 16)] f32: folded norms' sums
};

}  // namespace specd
