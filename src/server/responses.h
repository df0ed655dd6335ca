// OpenAI response bodies and stream chunks for chat and text completions.
#pragma once

#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/batch_engine.h"
#include "engine/generation.h"
#include "tokenizer/tokenizer.h"

namespace specd::server {

struct ResponseInfo {
  bool chat = false;
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
  std::string drafter;
};

// Logprobs of `entries` in the chat form ({"content": [...]}) or the completions form
// ({tokens, token_logprobs, top_logprobs, text_offset}); `offset` is the text offset of the
// first entry and advances past them.
OrderedJson logprobs_json(const std::vector<TokenLogprob>& entries, const Tokenizer& tokenizer,
                          bool chat, size_t& offset);
OrderedJson usage_json(const GenerationStats& stats);
// The speculative-decoding statistics of one request.
OrderedJson specd_json(const GenerationStats& stats, const std::string& drafter);

// A whole (non-streamed) response.
OrderedJson completion_json(const ResponseInfo& info, const std::string& text,
                            const std::string& finish_reason, const OrderedJson& logprobs,
                            const GenerationStats& stats);
// One stream chunk; `finish_reason` empty = still running; `first` adds the assistant role.
OrderedJson chunk_json(const ResponseInfo& info, const std::string& text, bool first,
                       const std::string& finish_reason, const OrderedJson& logprobs);
// The final usage chunk (stream_options.include_usage): empty choices plus usage and stats.
OrderedJson usage_chunk_json(const ResponseInfo& info, const GenerationStats& stats);

}  // namespace specd::server
