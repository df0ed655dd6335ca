// `specd render-chat`: renders a model's chat template over a conversation, as transformers'
// apply_chat_template(tokenize=False) would, and prints the prompt as a JSON string.
#include <iostream>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "core/error.h"

namespace specd::cli {

namespace {

struct RenderChatOptions {
  std::string model_dir;
  std::string messages_file;
  std::string tools_file;
  std::string template_kwargs;
  std::string chat_template_file;
  std::string now;
  bool no_generation_prompt = false;
};

void run_render_chat(const RenderChatOptions& o) {
  OrderedJson input = read_ordered_json_file(o.messages_file);
  OrderedJson tools;
  // An OpenAI-style request body {"messages": [...], "tools": [...]} works as well as a bare array.
  if (input.is_object()) {
    SPECD_CHECK(input.contains("messages"),
                "{}: expected an array of messages or an object with "
                "\"messages\"",
                o.messages_file);
    if (input.contains("tools")) tools = input.at("tools");
    input = OrderedJson(input.at("messages"));
  }
  SPECD_CHECK(input.is_array(), "{}: messages must be a JSON array", o.messages_file);
  if (!o.tools_file.empty()) tools = read_ordered_json_file(o.tools_file);
  SPECD_CHECK(tools.is_null() || tools.is_array(), "{}: tools must be a JSON array",
              o.tools_file.empty() ? o.messages_file : o.tools_file);

  ChatRenderOptions options;
  const ChatTemplate tmpl =
      load_chat_template(o.model_dir, &options, !tools.is_null(), o.chat_template_file);
  options.tools = tools;
  options.add_generation_prompt = !o.no_generation_prompt;
  options.now = o.now;
  if (!o.template_kwargs.empty()) {
    const OrderedJson kwargs = parse_ordered_json(o.template_kwargs, "--template-kwargs");
    SPECD_CHECK(kwargs.is_object(),
                "--template-kwargs must be a JSON object, e.g. "
                "'{{\"enable_thinking\": false}}'");
    if (!options.extra_kwargs.is_object()) options.extra_kwargs = OrderedJson::object();
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
      options.extra_kwargs[it.key()] = it.value();
  }
  const std::string prompt = tmpl.render(input, options);
  std::cout << OrderedJson(prompt).dump() << "\n";
}

}  // namespace

void register_render_chat_command(CLI::App& app) {
  auto options = std::make_shared<RenderChatOptions>();
  CLI::App* command = app.add_subcommand(
      "render-chat",
      "Render the model's chat template over a conversation and print the prompt as a JSON "
      "string (needs only the tokenizer files, no weights)");
  command
      ->add_option("-m,--model", options->model_dir,
                   "Model directory with tokenizer_config.json or chat_template.jinja")
      ->required()
      ->check(existing_model_path());
  command
      ->add_option("--messages", options->messages_file,
                   "JSON file: an array of messages, or {\"messages\": [...], \"tools\": [...]}"
                   " ('-' reads standard input)")
      ->required();
  command->add_option("--tools", options->tools_file, "JSON file with an array of tool schemas")
      ->check(CLI::ExistingFile);
  command
      ->add_option("--chat-template", options->chat_template_file,
                   "Jinja chat template file to use instead of the model's own (the special "
                   "tokens still come from the model)")
      ->check(CLI::ExistingFile);
  command->add_flag("--no-generation-prompt", options->no_generation_prompt,
                    "Do not append the assistant header (add_generation_prompt=False)");
  command->add_option(
      "--template-kwargs", options->template_kwargs,
      "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  command->add_option("--now", options->now,
                      "Date strftime_now() sees: YYYY-MM-DD[ HH:MM[:SS]] (default: "
                      "$SPECD_CHAT_NOW, else now)");
  command->callback([options] { run_render_chat(*options); });
}

}  // namespace specd::cli
