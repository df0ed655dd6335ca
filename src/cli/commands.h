// Registration of the `specd` subcommands; each lives in its own cmd_<name>.cc file.
#pragma once

#include <CLI/CLI.hpp>

namespace specd::cli {

// Each function adds one subcommand (with its options and callback) to `app`. Callbacks throw
// specd::Error for bad input; main() prints it as "error: <message>" and exits with status 1.
void register_generate_command(CLI::App& app);
void register_eval_logits_command(CLI::App& app);
void register_perplexity_command(CLI::App& app);
void register_info_command(CLI::App& app);
void register_bench_command(CLI::App& app);
void register_plot_command(CLI::App& app);
void register_tokenize_commands(CLI::App& app);  // tokenize, detokenize
void register_render_chat_command(CLI::App& app);
void register_serve_command(CLI::App& app);

}  // namespace specd::cli
