// Prompt resolution: tokenizer.json encoding and chat-template rendering.
#include "cli/prompt_source.h"

#include "chat/chat_template.h"
#include "cli/model_loader.h"
#include "core/error.h"
#include "core/log.h"
#include "io/gguf.h"
#include "io/mapped_file.h"

namespace specd::cli {

void PromptOptions::add_to(CLI::App& command) {
  auto* t = command.add_option("-p,--prompt", text, "Prompt text");
  auto* f = command.add_option("-f,--prompt-file", file, "Read the prompt text from a file")
                ->check(CLI::ExistingFile);
  auto* i = command.add_option("--prompt-ids", ids, "Prompt as token ids, e.g. \"1,2,3\"");
  t->excludes(f)->excludes(i);
  f->excludes(i);
  auto* c = command.add_flag("--chat", chat,
                             "Send the prompt as a user message through the model's chat template");
  command
      .add_option("--chat-template", chat_template_file,
                  "Jinja chat template file to use with --chat instead of the model's own "
                  "(needed for models that ship none, e.g. Gemma 3 GGUF files)")
      ->check(CLI::ExistingFile)
      ->needs(c);
  command.add_option("--system", system, "System message (with --chat)");
  command.add_option("--template-kwargs", template_kwargs,
                     "More chat-template variables as a JSON object, e.g. "
                     "'{\"enable_thinking\": false}'");
}

bool PromptOptions::given() const { return !text.empty() || !file.empty() || !ids.empty(); }

std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& model_dir) {
  if (!is_gguf_file(model_dir) && !file_exists(model_dir + "/tokenizer.json")) return nullptr;
  if (!is_gguf_file(model_dir)) return std::make_unique<Tokenizer>(Tokenizer::load(model_dir));
  try {
    return std::make_unique<Tokenizer>(Tokenizer::load(model_dir));
  } catch (const Error& e) {
    // A GGUF model whose tokenizer specd cannot build yet still runs on token ids.
    SPECD_LOG_WARN("warning: {}; only token-id prompts (--prompt-ids, prompt_ids) can be used",
                   e.what());
    return nullptr;
  }
}

Prompt resolve_prompt(const PromptOptions& o, const std::string& model_dir) {
  Prompt prompt;
  prompt.tokenizer = load_tokenizer_if_present(model_dir);
  if (!o.ids.empty()) {
    SPECD_CHECK(!o.chat, "--chat needs a text prompt, not --prompt-ids");
    prompt.ids = parse_token_ids(o.ids);
    return prompt;
  }
  std::string text = o.file.empty() ? o.text : read_text_file(o.file);
  SPECD_CHECK(prompt.tokenizer != nullptr,
              "{} has no usable tokenizer, so text prompts cannot be encoded; pass --prompt-ids",
              model_dir);
  bool add_special = true;
  if (o.chat) {
    ChatRenderOptions render;
    ChatTemplate chat_template =
        load_chat_template(model_dir, &render, false, o.chat_template_file);
    if (!o.template_kwargs.empty()) {
      OrderedJson kwargs = parse_ordered_json(o.template_kwargs, "--template-kwargs");
      SPECD_CHECK(kwargs.is_object(), "--template-kwargs must be a JSON object");
      if (render.extra_kwargs.is_null()) render.extra_kwargs = OrderedJson::object();
      for (const auto& [key, value] : kwargs.items()) render.extra_kwargs[key] = value;
    }
    OrderedJson messages = OrderedJson::array();
    if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
    messages.push_back({{"role", "user"}, {"content", text}});
    text = chat_template.render(messages, render);
    add_special = false;  // the template writes the special tokens itself
  }
  prompt.ids = prompt.tokenizer->encode(text, add_special);
  SPECD_CHECK(!prompt.ids.empty(), "the prompt is empty");
  return prompt;
}

}  // namespace specd::cli
