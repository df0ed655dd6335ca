// `specd generate`: plain generation from a prompt, streamed to stdout or as one JSON object.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_source.h"
#include "cli/spec_options.h"
#include "cli/stats_json.h"
#include "core/error.h"
#include "engine/generator.h"

namespace specd::cli {

namespace {

struct GenerateOptions {
  LoadOptions load;
  std::string kv_dtype = "bf16";
  PromptOptions prompt;
  int max_tokens = 128;
  bool ignore_eos = false;
  bool json = false;
  SamplingOptions sampling;
  SpecOptions spec;
};

void run_generate(GenerateOptions& o) {
  Prompt resolved = resolve_prompt(o.prompt, o.load.model_dir);
  const std::vector<int32_t>& prompt = resolved.ids;
  Tokenizer* tokenizer = resolved.tokenizer.get();
  SPECD_CHECK(o.max_tokens >= 1, "--max-tokens must be at least 1");
  o.load.kv_dtype = parse_kv_dtype(o.kv_dtype);
  const int needed = static_cast<int>(prompt.size()) + o.max_tokens + 1;
  if (o.load.context == 0) o.load.context = needed;
  SPECD_CHECK(needed <= o.load.context,
              "prompt ({} tokens) + --max-tokens ({}) exceed --ctx-size ({})", prompt.size(),
              o.max_tokens, o.load.context);
  o.load.progress = !o.json;
  LoadedModel loaded = load_model(o.load);

  GenerateRequest request;
  request.prompt = prompt;
  request.max_tokens = o.max_tokens;
  request.sampling = o.sampling.resolve(loaded.config);
  if (!o.ignore_eos) {
    request.stop_tokens = loaded.config.eos_token_ids;
    if (tokenizer && tokenizer->eos_id()) request.stop_tokens.push_back(*tokenizer->eos_id());
  }

  std::shared_ptr<LoadedModel> draft;
  Speculation spec =
      make_speculation(o.spec.resolved_mode(), o.spec, o.load, loaded.config, &draft);
  Generator generator(*loaded.model, *loaded.kv, spec.drafter, o.spec.lengths());
  generator.warm_up();  // CUDA graphs are recorded here, not inside the decode measured below
  std::unique_ptr<StreamingDetokenizer> detokenizer;
  if (tokenizer) detokenizer = std::make_unique<StreamingDetokenizer>(*tokenizer, true);
  auto stream = [&](int32_t token) {
    if (o.json) return true;
    if (detokenizer) {
      std::fputs(detokenizer->push(token).c_str(), stdout);
    } else {
      std::printf("%d ", token);
    }
    std::fflush(stdout);
    return true;
  };
  GenerationResult result = generator.generate(request, stream);
  const GenerationStats& s = result.stats;
  if (o.json) {
    nlohmann::ordered_json out = {
        {"tokens", result.tokens},
        {"text", tokenizer ? nlohmann::ordered_json(tokenizer->decode(result.tokens, true))
                           : nlohmann::ordered_json(nullptr)},
        {"finish_reason", result.finish_reason},
        {"stats", stats_json(s)}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    if (detokenizer) std::fputs(detokenizer->flush().c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout);  // the text ends before the summary on stderr, also through a pipe
    std::fprintf(stderr,
                 "prompt %d tok at %.1f tok/s | generated %d tok at %.2f tok/s | spec %s: "
                 "acceptance length %.2f (%d/%d drafts accepted) | finish: %s\n",
                 s.prompt_tokens, s.prefill_tok_s(), s.generated_tokens, s.decode_tok_s(),
                 spec.mode.c_str(), s.acceptance_length(), s.accepted, s.drafted,
                 result.finish_reason.c_str());
  }
}

}  // namespace

void register_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt");
  add_model_options(*cmd, options->load, options->kv_dtype);
  options->prompt.add_to(*cmd);
  cmd->add_option("-n,--max-tokens", options->max_tokens, "Tokens to generate")
      ->check(at_least(1))
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_flag("--json", options->json, "Print one JSON object with tokens, text and stats");
  options->sampling.add_to(*cmd);
  options->spec.add_to(*cmd);
  cmd->callback([options] {
    SPECD_CHECK(options->prompt.given(),
                "give a prompt with --prompt, --prompt-file or --prompt-ids");
    run_generate(*options);
  });
}

}  // namespace specd::cli
