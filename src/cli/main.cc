// specd: command-line entry point; dispatches to the subcommands.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "specd: fast, lossless LLM decoding on CPUs and NVIDIA GPUs.\n"
      "Loads Hugging Face model directories (Llama, Qwen2, Qwen3, Mistral, Gemma 3 text) and\n"
      "GGUF files; speculative decoding with a draft model, prompt lookup, or both."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("specd ") + SPECD_VERSION);
  specd::cli::register_generate_command(app);
  specd::cli::register_bench_command(app);
  specd::cli::register_plot_command(app);
  specd::cli::register_info_command(app);
  specd::cli::register_eval_logits_command(app);
  specd::cli::register_perplexity_command(app);
  specd::cli::register_tokenize_commands(app);
  specd::cli::register_render_chat_command(app);
  specd::cli::register_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const specd::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
