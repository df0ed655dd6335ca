// Finds a model directory's chat template and special tokens the way transformers'
// AutoTokenizer.from_pretrained does (chat_template.jinja, then tokenizer_config.json).
#include <iostream>
#include <iterator>

#include "chat/chat_template.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/mapped_file.h"

namespace specd {
namespace {

// A special token in tokenizer_config.json: a string, {"content": ...} (an AddedToken), or null.
std::string token_string(const Json& config, const std::string& key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const Json& value = config.at(key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string()) {
    return value.at("content").get<std::string>();
  }
  return "";
}

std::string pick_template(const Json& templates, bool with_tools, const std::string& file) {
  if (templates.is_string()) return templates.get<std::string>();
  SPECD_CHECK(templates.is_array() || templates.is_object(),
              "{}: \"chat_template\" must be a string or a list of {{name, template}}", file);
  std::string default_template, tool_template;
  bool have_default = false, have_tool = false;
  const auto take = [&](const std::string& name, const Json& text) {
    SPECD_CHECK(text.is_string(), "{}: chat template '{}' is not a string", file, name);
    if (name == "default") default_template = text.get<std::string>(), have_default = true;
    if (name == "tool_use") tool_template = text.get<std::string>(), have_tool = true;
  };
  if (templates.is_array()) {
    for (const Json& entry : templates) {
      SPECD_CHECK(entry.is_object() && entry.contains("name") && entry.at("name").is_string() &&
                      entry.contains("template"),
                  "{}: each chat template needs a \"name\" and a \"template\"", file);
      take(entry.at("name").get<std::string>(), entry.at("template"));
    }
  } else {
    for (auto it = templates.begin(); it != templates.end(); ++it) take(it.key(), it.value());
  }
  if (with_tools && have_tool) return tool_template;
  SPECD_CHECK(have_default, "{}: the model has several chat templates and none named 'default'",
              file);
  return default_template;
}

// The special-token strings of a GGUF file (from their ids) as template variables:
// bos_token / eos_token, and unk_token / pad_token in extra_kwargs as transformers passes them.
void gguf_defaults(const GgufHeader& h, ChatRenderOptions* defaults) {
  const GgufValue* tokens = h.find("tokenizer.ggml.tokens");
  const auto token = [&](const char* key) -> std::string {
    const GgufValue* id = h.find(key);
    if (id == nullptr || tokens == nullptr) return "";
    const auto& list = tokens->as_strings("tokenizer.ggml.tokens");
    const int64_t i = id->as_int(key);
    return i >= 0 && static_cast<size_t>(i) < list.size() ? list[static_cast<size_t>(i)] : "";
  };
  defaults->bos_token = token("tokenizer.ggml.bos_token_id");
  defaults->eos_token = token("tokenizer.ggml.eos_token_id");
  const std::pair<const char*, const char*> others[] = {
      {"unk_token", "tokenizer.ggml.unknown_token_id"},
      {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [name, key] : others) {
    const std::string value = token(key);
    if (value.empty()) continue;
    if (!defaults->extra_kwargs.is_object()) defaults->extra_kwargs = OrderedJson::object();
    if (!defaults->extra_kwargs.contains(name)) defaults->extra_kwargs[name] = value;
  }
}

// tokenizer.chat_template of a GGUF file (or `template_file`), with the special tokens.
ChatTemplate load_gguf_chat_template(const std::string& path, ChatRenderOptions* defaults,
                                     const std::string& template_file) {
  GgufFile file(path);
  const GgufHeader& h = file.header();
  if (defaults != nullptr) gguf_defaults(h, defaults);
  if (!template_file.empty()) return ChatTemplate(read_text_file(template_file));
  const GgufValue* text = h.find("tokenizer.chat_template");
  SPECD_CHECK(text != nullptr,
              "{}: the GGUF file has no chat template (no tokenizer.chat_template); pass a "
              "Jinja chat template file with --chat-template FILE",
              path);
  return ChatTemplate(text->as_string("tokenizer.chat_template"));
}

}  // namespace

ChatTemplate load_chat_template(const std::string& model_dir, ChatRenderOptions* defaults,
                                bool with_tools) {
  return load_chat_template(model_dir, defaults, with_tools, "");
}

ChatTemplate load_chat_template(const std::string& model_dir, ChatRenderOptions* defaults,
                                bool with_tools, const std::string& template_file) {
  if (is_gguf_file(model_dir)) return load_gguf_chat_template(model_dir, defaults, template_file);
  const std::string config_path = model_dir + "/tokenizer_config.json";
  const std::string jinja_path = model_dir + "/chat_template.jinja";
  const std::string tool_jinja_path = model_dir + "/additional_chat_templates/tool_use.jinja";
  Json config;
  if (file_exists(config_path)) config = read_json_file(config_path);
  Json special_map;
  if (file_exists(model_dir + "/special_tokens_map.json")) {
    special_map = read_json_file(model_dir + "/special_tokens_map.json");
  }
  if (defaults != nullptr) {
    const auto token = [&](const std::string& key) {
      std::string value = token_string(config, key);
      return value.empty() ? token_string(special_map, key) : value;
    };
    defaults->bos_token = token("bos_token");
    defaults->eos_token = token("eos_token");
    for (const char* key : {"unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
      const std::string value = token(key);
      if (value.empty()) continue;
      if (!defaults->extra_kwargs.is_object()) defaults->extra_kwargs = OrderedJson::object();
      if (!defaults->extra_kwargs.contains(key)) defaults->extra_kwargs[key] = value;
    }
  }
  if (!template_file.empty()) return ChatTemplate(read_text_file(template_file));
  if (with_tools && file_exists(tool_jinja_path))
    return ChatTemplate(read_text_file(tool_jinja_path));
  if (file_exists(jinja_path)) return ChatTemplate(read_text_file(jinja_path));
  SPECD_CHECK(config.is_object() && config.contains("chat_template") &&
                  !config.at("chat_template").is_null(),
              "{} has no chat template (no chat_template.jinja and no \"chat_template\" in {}); "
              "pass a Jinja chat template file with --chat-template FILE",
              model_dir, config_path);
  return ChatTemplate(pick_template(config.at("chat_template"), with_tools, config_path));
}

OrderedJson parse_ordered_json(const std::string& text, const std::string& what) {
  try {
    return OrderedJson::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: invalid JSON: {}", what, error.what());
  }
}

OrderedJson read_ordered_json_file(const std::string& path) {
  if (path == "-") {
    const std::string text{std::istreambuf_iterator<char>(std::cin),
                           std::istreambuf_iterator<char>()};
    return parse_ordered_json(text, "standard input");
  }
  return parse_ordered_json(read_text_file(path), path);
}

}  // namespace specd
