// Plain autoregressive generation for one sequence: chunked prefill, then one row per step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "sample/sampler.h"

namespace specd {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<int> stop_tokens;  // generation ends after emitting one of these
};

struct GenerationStats {
  int prompt_tokens = 0;
  int generated_tokens = 0;
  int forwards = 0;          // target forwards in the decode phase
  double prefill_seconds = 0;  // prompt forwards up to the first token's logits
  double decode_seconds = 0;   // after the first token until the end
  double sample_seconds = 0;   // logits processing and sampling, all phases

  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  // Tokens per second of the decode phase (tokens after the first over its duration).
  double decode_tok_s() const {
    return decode_seconds > 0 ? (generated_tokens - 1) / decode_seconds : 0;
  }
};

struct GenerationResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;  // "stop" (a stop token) or "length"
  GenerationStats stats;
};

class Generator {
 public:
  // Uses slot `slot` of `kv`; the cache must hold prompt + max_tokens entries.
  Generator(Transformer& model, KvCache& kv, int slot = 0);

  // Called with each new token as soon as it is chosen; return false to stop early.
  using TokenCallback = std::function<bool(int32_t)>;
  GenerationResult generate(const GenerateRequest& request, const TokenCallback& on_token = {});

  // Runs the prompt through the model into the cache (chunks of the model's max rows) and
  // returns the last row's logits. Sets the slot's KV length to the prompt length.
  Tensor prefill(const std::vector<int32_t>& prompt);

 private:
  Transformer& model_;
  KvCache& kv_;
  int slot_;
  Sampler sampler_;
  TokenHistory prompt_history_;
  TokenHistory output_history_;
  std::vector<float> logits_;       // [vocab] host copy of the current row
  std::vector<int32_t> positions_;  // [max_rows]
  std::vector<int32_t> slots_;      // [max_rows]
};

}  // namespace specd
