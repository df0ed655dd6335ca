// Public API of the chat module: renders a model's Jinja chat template exactly as Hugging Face
// transformers' apply_chat_template(..., tokenize=False) does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/json_file.h"

namespace specd {

// Keeps object keys in input order, which `tojson` output depends on (Python dicts are ordered).
// Parse requests and message files into this type; a specd::Json converts implicitly, but with
// its keys sorted.
using OrderedJson = nlohmann::ordered_json;

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  OrderedJson tools;                 // null, or an array of tool schemas
  OrderedJson extra_kwargs;          // null or an object of more template variables, e.g.
                                     // {"enable_thinking": false}; they override bos/eos_token
  std::string bos_token, eos_token;  // template variables when not empty
  // Fixes what strftime_now() formats: "YYYY-MM-DD", "YYYY-MM-DD HH:MM" or
  // "YYYY-MM-DDTHH:MM:SS". Empty: $SPECD_CHAT_NOW if set, else the current local time.
  std::string now;
};

namespace chat {
struct Node;
}  // namespace chat

class ChatTemplate {
 public:
  // Parses `source`; throws specd::Error "chat template line N: ..." on syntax errors and
  // unsupported constructs.
  explicit ChatTemplate(std::string source);

  // Renders a conversation (an array of message objects) as transformers' apply_chat_template
  // does: drops null-valued message keys, copies reasoning_content/thinking/reasoning into both
  // `reasoning_content` and `thinking`, and passes messages, tools, documents (none),
  // add_generation_prompt, bos_token, eos_token and the extra kwargs. Throws specd::Error
  // "chat template line N: ..." on runtime errors and on raise_exception().
  std::string render(const OrderedJson& messages, const ChatRenderOptions& options) const;
  std::string render(const Json& messages, const ChatRenderOptions& options) const;

  // Low level: renders with exactly `variables` (an object) plus the environment globals.
  std::string render_variables(const OrderedJson& variables, const std::string& now = "") const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<chat::Node>>> body_;
};

// Loads the chat template of a Hugging Face model directory: chat_template.jinja (or
// additional_chat_templates/tool_use.jinja when `with_tools`), else tokenizer_config.json's
// "chat_template" (a string, or a list of {name, template}: "tool_use" when `with_tools` and
// present, else "default"). Fills defaults->bos_token / eos_token from tokenizer_config.json
// (a string or {"content": ...}), falling back to special_tokens_map.json, and puts the other
// special tokens (unk, pad, sep, cls, mask) into defaults->extra_kwargs as transformers does.
// A GGUF file's template is tokenizer.chat_template, with bos/eos (and unk/pad in extra_kwargs)
// from the token ids of its metadata. `defaults` may be null. Throws specd::Error naming the
// file, and the --chat-template option, when there is no template.
ChatTemplate load_chat_template(const std::string& model_dir, ChatRenderOptions* defaults,
                                bool with_tools = false);
// The same special tokens from `model_dir`, but the template read from `template_file` when it
// is not empty (the --chat-template FILE option).
ChatTemplate load_chat_template(const std::string& model_dir, ChatRenderOptions* defaults,
                                bool with_tools, const std::string& template_file);

// Parses a JSON file (messages, tools) keeping object keys in file order; "-" reads stdin.
// Throws specd::Error naming the file on I/O or syntax errors.
OrderedJson read_ordered_json_file(const std::string& path);
// Parses JSON text keeping key order; `what` names the source in error messages.
OrderedJson parse_ordered_json(const std::string& text, const std::string& what);

}  // namespace specd
