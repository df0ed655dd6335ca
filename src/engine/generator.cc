// The plain decode loop: the baseline that every speculative method must reproduce exactly.
#include "engine/generator.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/timer.h"

namespace specd {

Generator::Generator(Transformer& model, KvCache& kv, int slot)
    : model_(model),
      kv_(kv),
      slot_(slot),
      sampler_(model.config().vocab_size),
      prompt_history_(model.config().vocab_size),
      output_history_(model.config().vocab_size),
      logits_(model.config().vocab_size),
      positions_(model.limits().max_rows),
      slots_(model.limits().max_rows, slot) {}

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
    ForwardBatch batch;
    batch.n_rows = rows;
    batch.tokens = prompt.data() + begin;
    batch.positions = positions_.data();
    batch.slots = slots_.data();
    bool last = begin + rows == n;
    int32_t last_row = rows - 1;
    batch.logit_rows = &last_row;
    batch.n_logit_rows = last ? 1 : 0;
    logits = model_.forward(batch, kv_);
  }
  kv_.set_length(slot_, n);
  return logits;
}

GenerationResult Generator::generate(const GenerateRequest& request, const TokenCallback& on_token) {
  validate_sampling_params(request.sampling);
  SPECD_CHECK(request.max_tokens >= 0, "max_tokens must be >= 0");
  const int n_prompt = static_cast<int>(request.prompt.size());
  SPECD_CHECK(n_prompt + request.max_tokens <= kv_.shape().capacity,
              "prompt ({}) + max_tokens ({}) exceed the context size ({})", n_prompt,
              request.max_tokens, kv_.shape().capacity);
  GenerationResult result;
  result.finish_reason = "length";
  result.stats.prompt_tokens = n_prompt;
  result.tokens.reserve(request.max_tokens);
  prompt_history_.clear();
  output_history_.clear();
  if (request.sampling.repetition_penalty != 1.0) {
    for (int32_t token : request.prompt) prompt_history_.add(token);
  }

  double start = now_seconds();
  Tensor logits = prefill(request.prompt);
  double decode_start = 0;
  int position = n_prompt;  // where the next sampled token will sit
  while (static_cast<int>(result.tokens.size()) < request.max_tokens) {
    double t0 = now_seconds();
    model_.backend().copy_to_host(logits_.data(), logits.data, logits_.size() * sizeof(float));
    if (request.sampling.has_penalties()) {
      Sampler::apply_penalties(logits_, request.sampling, prompt_history_, output_history_);
    }
    int32_t token = sampler_.sample(logits_, request.sampling, position);
    double t1 = now_seconds();
    result.stats.sample_seconds += t1 - t0;
    if (result.tokens.empty()) {
      result.stats.prefill_seconds = t0 - start;
      decode_start = t1;
    }
    result.tokens.push_back(token);
    output_history_.add(token);
    bool keep_going = !on_token || on_token(token);
    if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(), token) !=
        request.stop_tokens.end()) {
      result.finish_reason = "stop";
      break;
    }
    if (!keep_going || static_cast<int>(result.tokens.size()) == request.max_tokens) break;
    ForwardBatch batch;
    batch.n_rows = 1;
    batch.tokens = &token;
    batch.positions = &position;
    batch.slots = &slot_;
    logits = model_.forward(batch, kv_);
    kv_.set_length(slot_, position + 1);
    ++position;
    ++result.stats.forwards;
  }
  result.stats.generated_tokens = static_cast<int>(result.tokens.size());
  if (decode_start > 0) result.stats.decode_seconds = now_seconds() - decode_start;
  return result;
}

}  // namespace specd
