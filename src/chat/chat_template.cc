// Public API of the chat module: renders a model's Jinja chat template exactly as Hugging Face
// transformers' apply_chat_template(..., tokenize=False) does.
#include "chat/chat_template.h"

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "chat/ast.h"
#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/objects.h"
#include "chat/parser.h"
#include "chat/utf8.h"
#include "core/error.h"

namespace specd {
namespace {

using chat::Value;

template <typename J>
Value from_json(const J& j, int depth = 0) {
  SPECD_CHECK(depth < 512, "chat template input nested too deeply");
  switch (j.type()) {
    case J::value_t::null:
      return Value::none();
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      const uint64_t v = j.template get<uint64_t>();
      SPECD_CHECK(v <= static_cast<uint64_t>(INT64_MAX), "integer {} is too large for templates",
                  v);
      return Value(static_cast<int64_t>(v));
    }
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get<std::string>());
    case J::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item, depth + 1));
      return chat::make_list(std::move(items));
    }
    case J::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        items.emplace_back(Value(it.key()), from_json(it.value(), depth + 1));
      }
      return chat::make_dict(std::move(items));
    }
    default:
      fail("unsupported JSON value in chat template input");
  }
}

// Parses "YYYY-MM-DD[( |T)HH:MM[:SS]]".
std::tm parse_now(const std::string& text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  char sep = ' ';
  const int n = std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &year, &month, &day, &sep,
                            &hour, &minute, &second);
  SPECD_CHECK((n == 3 || n >= 6) && (n == 3 || sep == ' ' || sep == 'T') && month >= 1 &&
                  month <= 12 && day >= 1 && day <= 31 && hour < 24 && minute < 60 && second < 61,
              "bad chat template date '{}' (expected YYYY-MM-DD, YYYY-MM-DD HH:MM or "
              "YYYY-MM-DDTHH:MM:SS)",
              text);
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const time_t t = timegm(&tm);  // normalizes and fills the weekday and day of the year
  std::tm out{};
  gmtime_r(&t, &out);
  return out;
}

std::tm resolve_now(const std::string& fixed) {
  if (!fixed.empty()) return parse_now(fixed);
  if (const char* env = std::getenv("SPECD_CHAT_NOW"); env != nullptr && *env != '\0') {
    return parse_now(env);
  }
  const time_t t = std::time(nullptr);
  std::tm out{};
  localtime_r(&t, &out);
  return out;
}

std::string render_body(const chat::Body& body, const chat::ScopePtr& variables,
                        const std::tm& now) {
  chat::Interpreter interp(chat::RenderLimits{}, now);
  return interp.render(body, variables);
}

chat::ScopePtr make_root_scope() {
  auto globals = std::make_shared<chat::Scope>(nullptr);
  chat::add_globals(globals.get());
  return std::make_shared<chat::Scope>(globals);
}

// transformers' message preparation: drop None-valued keys, then alias the reasoning fields
// (`_alias_reasoning_fields`): {"thinking": r, **message, "reasoning_content": r}.
template <typename J>
Value prepare_message(const J& message) {
  SPECD_CHECK(message.is_object(), "chat messages must be JSON objects, got {}",
              message.dump().substr(0, 200));
  std::vector<std::pair<Value, Value>> items;
  for (auto it = message.begin(); it != message.end(); ++it) {
    if (!it.value().is_null()) items.emplace_back(Value(it.key()), from_json(it.value()));
  }
  const Value* reasoning = nullptr;
  for (const char* field : {"reasoning_content", "thinking", "reasoning"}) {
    for (const auto& [key, value] : items) {
      if (key.str() == field) reasoning = &value;
    }
    if (reasoning != nullptr) break;
  }
  if (reasoning == nullptr) return chat::make_dict(std::move(items));
  const Value r = *reasoning;
  std::vector<std::pair<Value, Value>> aliased;
  aliased.emplace_back(Value("thinking"), r);
  for (auto& [key, value] : items) {
    if (key.str() == "thinking") {
      aliased[0].second = std::move(value);
    } else {
      aliased.emplace_back(std::move(key), std::move(value));
    }
  }
  bool replaced = false;
  for (auto& [key, value] : aliased) {
    if (key.str() == "reasoning_content") {
      value = r;
      replaced = true;
    }
  }
  if (!replaced) aliased.emplace_back(Value("reasoning_content"), r);
  return chat::make_dict(std::move(aliased));
}

template <typename J>
std::string render_conversation(const chat::Body& body, const J& messages,
                                const ChatRenderOptions& options) {
  SPECD_CHECK(messages.is_array(), "chat messages must be a JSON array");
  SPECD_CHECK(!messages.empty(),
              "Cannot apply chat template to an empty conversation. Provide at least one message.");
  SPECD_CHECK(options.tools.is_null() || options.tools.is_array(),
              "chat tools must be null or a JSON array");
  SPECD_CHECK(options.extra_kwargs.is_null() || options.extra_kwargs.is_object(),
              "chat template kwargs must be a JSON object");
  std::vector<Value> chat;
  for (const auto& message : messages) chat.push_back(prepare_message(message));
  chat::ScopePtr scope = make_root_scope();
  if (!options.bos_token.empty()) scope->set("bos_token", Value(options.bos_token));
  if (!options.eos_token.empty()) scope->set("eos_token", Value(options.eos_token));
  if (options.extra_kwargs.is_object()) {
    for (auto it = options.extra_kwargs.begin(); it != options.extra_kwargs.end(); ++it) {
      const std::string& key = it.key();
      SPECD_CHECK(key != "messages" && key != "tools" && key != "documents" &&
                      key != "add_generation_prompt",
                  "chat template kwargs cannot set '{}'", key);
      scope->set(key, from_json(it.value()));
    }
  }
  scope->set("messages", chat::make_list(std::move(chat)));
  scope->set("tools", from_json(options.tools));
  scope->set("documents", Value::none());
  scope->set("add_generation_prompt", Value(options.add_generation_prompt));
  return render_body(body, scope, resolve_now(options.now));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source) : source_(std::move(source)) {
  SPECD_CHECK(chat::is_valid_utf8(source_), "chat template is not valid UTF-8");
  auto body = std::make_shared<chat::Body>(chat::parse_template(chat::tokenize_template(source_)));
  body_ = std::move(body);
}

std::string ChatTemplate::render(const OrderedJson& messages,
                                 const ChatRenderOptions& options) const {
  return render_conversation(*body_, messages, options);
}

std::string ChatTemplate::render(const Json& messages, const ChatRenderOptions& options) const {
  return render_conversation(*body_, messages, options);
}

std::string ChatTemplate::render_variables(const OrderedJson& variables,
                                           const std::string& now) const {
  SPECD_CHECK(variables.is_object(), "chat template variables must be a JSON object");
  chat::ScopePtr scope = make_root_scope();
  for (auto it = variables.begin(); it != variables.end(); ++it) {
    scope->set(it.key(), from_json(it.value()));
  }
  return render_body(*body_, scope, resolve_now(now));
}

}  // namespace specd
