// JSON form of generation statistics, shared by `generate` and `bench`.
#include "cli/stats_json.h"

namespace specd::cli {

nlohmann::ordered_json acceptance_by_position(const GenerationStats& s) {
  nlohmann::ordered_json by_position = nlohmann::ordered_json::array();
  for (size_t i = 1; i < s.drafted_at.size() && s.drafted_at[i] > 0; ++i) {
    by_position.push_back(static_cast<double>(s.accepted_at[i]) / s.drafted_at[i]);
  }
  return by_position;
}

nlohmann::ordered_json stats_json(const GenerationStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"prefill_tok_s", s.prefill_tok_s()},
          {"decode_tok_s", s.decode_tok_s()},
          {"rounds", s.rounds},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"acceptance_length", s.acceptance_length()},
          {"acceptance_rate_by_position", acceptance_by_position(s)},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"draft_seconds", s.draft_seconds},
          {"verify_seconds", s.verify_seconds},
          {"sample_seconds", s.sample_seconds},
          {"bookkeeping_seconds", s.bookkeeping_seconds()}};
}

}  // namespace specd::cli
