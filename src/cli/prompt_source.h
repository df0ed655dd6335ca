// Where a prompt comes from: text, a file, token ids, or a chat message rendered by the model's
// chat template; and the tokenizer that turns it into ids and the output back into text.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace specd::cli {

struct PromptOptions {
  std::string text, file, ids;
  bool chat = false;
  std::string system;
  std::string template_kwargs;     // JSON object, e.g. {"enable_thinking": false}
  std::string chat_template_file;  // --chat-template: replaces the model's template

  // Adds --prompt, --prompt-file, --prompt-ids, --chat, --chat-template, --system,
  // --template-kwargs.
  void add_to(CLI::App& command);
  bool given() const;
};

struct Prompt {
  std::vector<int32_t> ids;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the model directory has none
};

// Loads the model's tokenizer if it has one.
std::unique_ptr<Tokenizer> load_tokenizer_if_present(const std::string& model_dir);

// Resolves the prompt into ids; throws specd::Error for text without a tokenizer, an empty
// prompt, or a chat request without a chat template.
Prompt resolve_prompt(const PromptOptions& options, const std::string& model_dir);

}  // namespace specd::cli
