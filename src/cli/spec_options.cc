// Speculative decoding options: draft model, n-gram lookup, draft length.
#include "cli/spec_options.h"

#include "cli/cli_options.h"
#include "core/error.h"
#include "spec/compatibility.h"

namespace specd::cli {

void SpecOptions::add_to(CLI::App& command, bool with_mode) {
  command.add_option("--draft", draft_dir, "Draft model directory (same tokenizer as the target)")
      ->check(existing_model_path());
  if (with_mode) {
    command
        .add_option("--spec", mode,
                    "Speculation: none, draft, ngram or ngram+draft (default: draft when "
                    "--draft is given, else none)")
        ->check(CLI::IsMember({"none", "draft", "ngram", "ngram+draft"}));
  }
  command.add_option("--draft-max", draft_max, "Longest draft per round")
      ->check(CLI::Range(1, static_cast<int>(kSmallBatch) - 1))
      ->capture_default_str();
  command.add_option("--draft-min", draft_min, "Shortest draft per round")
      ->check(CLI::Range(0, static_cast<int>(kSmallBatch) - 1))
      ->capture_default_str();
  command
      .add_option("--draft-fixed", draft_fixed,
                  "Always draft this many tokens (turns the adaptive length off)")
      ->check(CLI::Range(0, static_cast<int>(kSmallBatch) - 1));
  command
      .add_option("--draft-p-min", draft_p_min,
                  "Stop drafting when the draft's top probability falls below this")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  command.add_option("--ngram-min", ngram_min, "Shortest suffix the n-gram drafter matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command.add_option("--ngram-max", ngram_max, "Longest suffix the n-gram drafter matches")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command.add_option("--draft-device", draft_device,
                     "Device of the draft model: cpu, cuda or cuda:N (default: the target's)");
  add_quantize_option(command, "--draft-quantize", draft_quantize, "the draft model's");
}

DraftLengthOptions SpecOptions::lengths() const {
  DraftLengthOptions o;
  o.min_k = draft_min;
  o.max_k = std::max(draft_max, draft_min);
  o.fixed_k = draft_fixed;
  SPECD_CHECK(draft_min <= draft_max, "--draft-min ({}) exceeds --draft-max ({})", draft_min,
              draft_max);
  return o;
}

std::string SpecOptions::resolved_mode() const {
  if (!mode.empty()) return mode;
  return draft_dir.empty() ? "none" : "draft";
}

LoadedModel load_draft_model(const SpecOptions& options, const LoadOptions& target_load,
                             const ModelConfig& target, int slots) {
  check_draft_compatible(target_load.model_dir, target, options.draft_dir,
                         load_model_config(options.draft_dir));
  LoadOptions load = target_load;
  load.model_dir = options.draft_dir;
  load.device = options.draft_device.empty() ? target_load.device : options.draft_device;
  load.quantize = options.draft_quantize;
  load.context = target_load.context + kSmallBatch;  // the target's, plus a draft's length
  load.context_slack = target_load.context_slack + kSmallBatch;
  load.slots = slots;
  load.progress = false;
  return load_model(load);
}

Speculation make_speculation(const std::string& mode, const SpecOptions& options,
                             const LoadOptions& target_load, const ModelConfig& target,
                             std::shared_ptr<LoadedModel>* draft) {
  Speculation s;
  s.mode = mode;
  if (mode == "none") return s;
  const bool wants_model = mode == "draft" || mode == "ngram+draft";
  SPECD_CHECK(!wants_model || !options.draft_dir.empty(), "--spec {} needs --draft DIR", mode);
  if (mode == "ngram" || mode == "ngram+draft") {
    SPECD_CHECK(options.ngram_min <= options.ngram_max, "--ngram-min exceeds --ngram-max");
    s.ngram = std::make_unique<NgramDrafter>(options.ngram_min, options.ngram_max);
  }
  if (wants_model) {
    if (!*draft)
      *draft = std::make_shared<LoadedModel>(load_draft_model(options, target_load, target));
    int max_k = std::max(options.draft_max, options.draft_fixed);
    s.model_drafter = std::make_unique<ModelDrafter>(*(*draft)->model, *(*draft)->kv,
                                                     target.vocab_size, max_k, options.draft_p_min);
  }
  if (s.ngram && s.model_drafter) {
    s.chained = std::make_unique<ChainedDrafter>(
        std::vector<Drafter*>{s.ngram.get(), s.model_drafter.get()});
    s.drafter = s.chained.get();
  } else if (s.ngram) {
    s.drafter = s.ngram.get();
  } else {
    s.drafter = s.model_drafter.get();
  }
  return s;
}

}  // namespace specd::cli
