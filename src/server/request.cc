// Request validation: every field's type and range, with OpenAI-style messages.
#include "server/request.h"

#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "server/api_error.h"

namespace specd::server {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param, "invalid_value");
}

const OrderedJson* field(const OrderedJson& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number(const OrderedJson& body, const char* name, double lo, double hi) {
  const OrderedJson* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number", name));
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  }
  return x;
}

std::optional<int64_t> integer(const OrderedJson& body, const char* name, int64_t lo, int64_t hi) {
  const OrderedJson* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad(name, fmt::format("'{}' must be an integer", name));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  }
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) bad(name, fmt::format("'{}' must be between {} and {}", name, lo, hi));
  return x;
}

std::optional<bool> boolean(const OrderedJson& body, const char* name) {
  const OrderedJson* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(name, fmt::format("'{}' must be a boolean", name));
  return v->get<bool>();
}

std::string content_text(const OrderedJson& content, const std::string& param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "'content' must be a string or an array of text parts");
  std::string text;
  for (const OrderedJson& part : content) {
    if (!part.is_object()) bad(param, "each content part must be an object");
    const OrderedJson* type = field(part, "type");
    if (!type || !type->is_string()) bad(param, "each content part needs a string 'type'");
    if (*type != "text") {
      bad(param, fmt::format("content parts of type '{}' are not supported (text only)",
                             type->get<std::string>()));
    }
    const OrderedJson* t = field(part, "text");
    if (!t || !t->is_string()) bad(param, "a text content part needs a string 'text'");
    text += t->get<std::string>();
  }
  return text;
}

OrderedJson parse_messages(const OrderedJson& body) {
  const OrderedJson* list = field(body, "messages");
  if (!list) bad("messages", "'messages' is required");
  if (!list->is_array() || list->empty()) bad("messages", "'messages' must be a non-empty array");
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < list->size(); ++i) {
    const OrderedJson& m = (*list)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(param, "each message must be an object");
    const OrderedJson* role = field(m, "role");
    if (!role || !role->is_string()) bad(param + ".role", "each message needs a string 'role'");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      bad(param + ".role", fmt::format("unknown role '{}' (expected system, developer, user, "
                                       "assistant or tool)",
                                       r));
    }
    OrderedJson message = {{"role", r}};
    auto content = m.find("content");
    const bool has_tool_calls = field(m, "tool_calls") != nullptr;
    if (content == m.end() || content->is_null()) {
      if (r != "assistant" || !has_tool_calls) bad(param + ".content", "'content' is required");
      message["content"] = nullptr;
    } else {
      message["content"] = content_text(*content, param + ".content");
    }
    if (const OrderedJson* name = field(m, "name")) {
      if (!name->is_string()) bad(param + ".name", "'name' must be a string");
      message["name"] = *name;
    }
    if (has_tool_calls) {
      const OrderedJson& calls = *field(m, "tool_calls");
      if (!calls.is_array()) bad(param + ".tool_calls", "'tool_calls' must be an array");
      message["tool_calls"] = calls;
    }
    if (const OrderedJson* id = field(m, "tool_call_id")) {
      if (!id->is_string()) bad(param + ".tool_call_id", "'tool_call_id' must be a string");
      message["tool_call_id"] = *id;
    }
    out.push_back(std::move(message));
  }
  return out;
}

void parse_prompt(const OrderedJson& body, ApiRequest& r) {
  const OrderedJson* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  const OrderedJson* value = p;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    value = &(*p)[0];  // a batch of one prompt
  }
  if (value->is_string()) {
    r.prompt_text = value->get<std::string>();
    return;
  }
  if (!value->is_array() || value->empty()) {
    bad("prompt", "'prompt' must be a string or an array of token ids (one prompt per request)");
  }
  for (const OrderedJson& id : *value) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      bad("prompt", "'prompt' must be a string or an array of token ids (one prompt per request)");
    }
    r.prompt_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  r.prompt_is_ids = true;
}

}  // namespace

int json_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

ApiRequest parse_request(const std::string& text, bool chat, const SamplingParams& defaults) {
  if (json_depth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    throw ApiError(400,
                   fmt::format("the request body is nested deeper than {} levels", kMaxJsonDepth));
  }
  OrderedJson body = OrderedJson::parse(text, nullptr, false);
  if (body.is_discarded()) {
    throw ApiError(400, "the request body is not valid JSON (or not valid UTF-8)", "",
                   "invalid_json");
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  ApiRequest r;
  r.chat = chat;
  const OrderedJson* model = field(body, "model");
  if (!model) bad("model", "'model' is required");
  if (!model->is_string()) bad("model", "'model' must be a string");
  r.model = model->get<std::string>();
  if (chat) {
    r.messages = parse_messages(body);
    if (const OrderedJson* tools = field(body, "tools")) {
      if (!tools->is_array()) bad("tools", "'tools' must be an array");
      if (!tools->empty()) r.tools = *tools;
    }
  } else {
    parse_prompt(body, r);
  }
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  auto max_tokens = integer(body, "max_completion_tokens", 1, kMaxInt);
  if (!max_tokens) max_tokens = integer(body, "max_tokens", 1, kMaxInt);
  if (max_tokens) r.max_tokens = static_cast<int>(*max_tokens);
  SamplingParams& s = r.sampling;
  s = defaults;
  if (auto v = number(body, "temperature", 0, 2)) s.temperature = *v;
  if (auto v = number(body, "top_p", 0, 1)) s.top_p = *v;
  if (s.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  if (auto v = integer(body, "top_k", -1, kMaxInt)) s.top_k = *v < 0 ? 0 : static_cast<int>(*v);
  if (auto v = number(body, "min_p", 0, 1)) s.min_p = *v;
  if (auto v = number(body, "repetition_penalty", 0, 10)) {
    if (*v <= 0) bad("repetition_penalty", "'repetition_penalty' must be greater than 0");
    s.repetition_penalty = *v;
  }
  if (auto v = number(body, "presence_penalty", -2, 2)) s.presence_penalty = *v;
  if (auto v = number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = *v;
  if (auto v = integer(body, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*v);
    r.seed_given = true;
  }
  if (const OrderedJson* stop = field(body, "stop")) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > 16) bad("stop", "'stop' may hold at most 16 strings");
      for (const OrderedJson& item : *stop) {
        if (!item.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(item.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
  }
  if (auto v = boolean(body, "stream")) r.stream = *v;
  if (const OrderedJson* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "'stream_options' must be an object");
    if (auto v = boolean(*options, "include_usage")) r.include_usage = *v;
  }
  if (auto n = integer(body, "n", 1, kMaxInt); n && *n != 1) {
    bad("n", "only n = 1 is supported");
  }
  if (const OrderedJson* user = field(body, "user"); user && !user->is_string()) {
    bad("user", "'user' must be a string");
  }
  if (auto v = boolean(body, "ignore_eos")) r.ignore_eos = *v;
  if (chat) {
    bool want = boolean(body, "logprobs").value_or(false);
    auto top = integer(body, "top_logprobs", 0, 20);
    if (top && !want) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (want) r.top_logprobs = static_cast<int>(top.value_or(0));
  } else {
    if (const OrderedJson* v = field(body, "logprobs"); v && v->is_boolean()) {
      bad("logprobs", "'logprobs' must be an integer between 0 and 5");
    }
    if (auto v = integer(body, "logprobs", 0, 5)) r.top_logprobs = static_cast<int>(*v);
    if (auto echo = boolean(body, "echo"); echo && *echo) bad("echo", "'echo' is not supported");
  }
  return r;
}

}  // namespace specd::server
