// A parsed and validated /v1/chat/completions or /v1/completions request body.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "sample/sampling_params.h"

namespace specd::server {

struct ApiRequest {
  bool chat = false;
  std::string model;
  OrderedJson messages;             // chat: messages as the template expects them
  OrderedJson tools;                // chat: null or the tools array
  std::string prompt_text;          // completions: a text prompt ...
  std::vector<int32_t> prompt_ids;  // ... or token ids
  bool prompt_is_ids = false;
  std::optional<int> max_tokens;
  SamplingParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int top_logprobs = -1;  // -1: no logprobs
  bool ignore_eos = false;
};

// Largest nesting depth accepted in a request body (checked before parsing).
inline constexpr int kMaxJsonDepth = 64;

// Parses the body of a chat (`chat` = true) or completions request. Throws ApiError (400) naming
// the field for malformed JSON, wrong types, missing fields and out-of-range values. Unknown
// fields are ignored, as OpenAI does.
// Sampling fields the body leaves out take their values from `defaults`.
ApiRequest parse_request(const std::string& body, bool chat, const SamplingParams& defaults = {});

// Nesting depth of JSON text, counting brackets outside strings (stops early past `limit`).
int json_depth(const std::string& text, int limit);

}  // namespace specd::server
