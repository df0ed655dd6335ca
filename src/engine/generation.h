// A generation request, its result and its statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sample/sampling_params.h"

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
  int cached_prompt_tokens = 0;  // prompt tokens whose K/V came from a prefix cache
  int rounds = 0;             // target forwards in the decode phase (each verifies a draft)
  int drafted = 0;            // draft tokens proposed
  int accepted = 0;           // draft tokens accepted
  double prefill_seconds = 0;  // prompt forwards up to the first token
  double decode_seconds = 0;   // after the first token until the end
  double draft_seconds = 0;    // proposing (part of decode)
  double verify_seconds = 0;   // target forwards of the decode phase
  double sample_seconds = 0;   // logits processing, sampling and acceptance, all phases
  std::vector<int> drafted_at, accepted_at;  // per 1-based draft position (index 0 unused)

  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  // Tokens per second of the decode phase (tokens after the first over its duration).
  double decode_tok_s() const {
    return decode_seconds > 0 ? (generated_tokens - 1) / decode_seconds : 0;
  }
  // Tokens per target forward in the decode phase, bonus included (1 for plain decoding).
  double acceptance_length() const {
    return rounds > 0 ? static_cast<double>(generated_tokens - 1) / rounds : 1.0;
  }
  double bookkeeping_seconds() const {
    double rest = decode_seconds - draft_seconds - verify_seconds - sample_seconds;
    return rest > 0 ? rest : 0;
  }
};

struct GenerationResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;  // "stop" (a stop token) or "length"
  GenerationStats stats;
};

}  // namespace specd
