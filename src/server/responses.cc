// Building OpenAI-shaped JSON for responses and SSE chunks.
#include "server/responses.h"

namespace specd::server {

namespace {

OrderedJson bytes_of(const std::string& text) {
  OrderedJson out = OrderedJson::array();
  for (unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

OrderedJson logprobs_json(const std::vector<TokenLogprob>& entries, const Tokenizer& tokenizer,
                          bool chat, size_t& offset) {
  auto text_of = [&](int32_t id) { return tokenizer.decode(std::span<const int32_t>(&id, 1)); };
  if (chat) {
    OrderedJson content = OrderedJson::array();
    for (const TokenLogprob& e : entries) {
      std::string token = text_of(e.token);
      OrderedJson top = OrderedJson::array();
      for (const auto& [id, lp] : e.top) {
        std::string alt = text_of(id);
        top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes_of(alt)}});
      }
      content.push_back({{"token", token},
                         {"logprob", e.logprob},
                         {"bytes", bytes_of(token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  OrderedJson tokens = OrderedJson::array(), token_logprobs = OrderedJson::array(),
              top_logprobs = OrderedJson::array(), offsets = OrderedJson::array();
  for (const TokenLogprob& e : entries) {
    std::string token = text_of(e.token);
    tokens.push_back(token);
    token_logprobs.push_back(e.logprob);
    OrderedJson top = OrderedJson::object();
    for (const auto& [id, lp] : e.top) top[text_of(id)] = lp;
    top_logprobs.push_back(top);
    offsets.push_back(offset);
    offset += token.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

OrderedJson usage_json(const GenerationStats& s) {
  return {{"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.generated_tokens},
          {"total_tokens", s.prompt_tokens + s.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", s.cached_prompt_tokens}}}};
}

OrderedJson specd_json(const GenerationStats& s, const std::string& drafter) {
  return {{"drafter", drafter},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"rounds", s.rounds},
          {"acceptance_length", s.acceptance_length()},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"decode_tok_s", s.decode_tok_s()}};
}

OrderedJson completion_json(const ResponseInfo& info, const std::string& text,
                            const std::string& finish_reason, const OrderedJson& logprobs,
                            const GenerationStats& stats) {
  OrderedJson choice = {{"index", 0}};
  if (info.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason;
  return {{"id", info.id},
          {"object", info.chat ? "chat.completion" : "text_completion"},
          {"created", info.created},
          {"model", info.model},
          {"choices", OrderedJson::array({choice})},
          {"usage", usage_json(stats)},
          {"specd", specd_json(stats, info.drafter)}};
}

OrderedJson chunk_json(const ResponseInfo& info, const std::string& text, bool first,
                       const std::string& finish_reason, const OrderedJson& logprobs) {
  OrderedJson choice = {{"index", 0}};
  if (info.chat) {
    OrderedJson delta = OrderedJson::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] =
      finish_reason.empty() ? OrderedJson(nullptr) : OrderedJson(finish_reason);
  return {{"id", info.id},
          {"object", info.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", info.created},
          {"model", info.model},
          {"choices", OrderedJson::array({choice})}};
}

OrderedJson usage_chunk_json(const ResponseInfo& info, const GenerationStats& stats) {
  return {{"id", info.id},
          {"object", info.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", info.created},
          {"model", info.model},
          {"choices", OrderedJson::array()},
          {"usage", usage_json(stats)},
          {"specd", specd_json(stats, info.drafter)}};
}

}  // namespace specd::server
