// Command-line sampling and model options.
#include "cli/cli_options.h"

#include <sstream>

namespace specd::cli {

void SamplingOptions::add_to(CLI::App& command) {
  command.add_option("--temperature", temperature,
                     "Sampling temperature; 0 = greedy (default: the model's "
                     "generation_config.json if it sets do_sample, else 0)");
  command.add_option("--top-k", top_k, "Keep the k most likely tokens (0 = off)");
  command.add_option("--top-p", top_p, "Nucleus sampling: keep the smallest set with mass >= p");
  command.add_option("--min-p", min_p, "Drop tokens below min_p x the top probability");
  command.add_option("--repetition-penalty", repetition_penalty,
                     "Penalise tokens of the prompt and output (1 = off)");
  command.add_option("--presence-penalty", presence_penalty, "OpenAI presence penalty")
      ->check(CLI::Range(-2.0, 2.0));
  command.add_option("--frequency-penalty", frequency_penalty, "OpenAI frequency penalty")
      ->check(CLI::Range(-2.0, 2.0));
  command.add_option("--seed", seed, "Random seed for sampling")->capture_default_str();
}

SamplingParams SamplingOptions::resolve(const ModelConfig& config) const {
  SamplingParams p;
  if (config.do_sample) {
    p.temperature = config.temperature;
    p.top_p = config.top_p;
    p.top_k = config.top_k;
    p.min_p = config.min_p;
    p.repetition_penalty = config.repetition_penalty;
  }
  if (temperature) p.temperature = *temperature;
  if (top_p) p.top_p = *top_p;
  if (top_k) p.top_k = *top_k;
  if (min_p) p.min_p = *min_p;
  if (repetition_penalty) p.repetition_penalty = *repetition_penalty;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.seed = seed;
  validate_sampling_params(p);
  return p;
}

CLI::Validator at_least(double least) {
  std::ostringstream bound;
  bound << least;
  return CLI::Validator(
      [least, bound = bound.str()](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "not a number: " + text;
        return value < least ? "must be at least " + bound + " (got " + text + ")" : "";
      },
      least == 1   ? "POSITIVE"
      : least == 0 ? "NONNEGATIVE"
                   : ">=" + bound.str());
}

CLI::Validator existing_model_path() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        return CLI::ExistingPath(path).empty()
                   ? ""
                   : "model directory or GGUF file does not exist: " + path;
      },
      "PATH");
}

void add_quantize_option(CLI::App& command, const std::string& flag, WeightQuant& quant,
                         const std::string& what) {
  command
      .add_option_function<std::string>(
          flag, [&quant](const std::string& text) { quant = parse_weight_quant(text); },
          "Quantise " + what +
              " weights at load: none, int8 (per output channel) or int4 (group 128, "
              "asymmetric); linear layers and the LM head")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->default_str("none");
}

void add_model_options(CLI::App& command, LoadOptions& options, std::string& kv_dtype) {
  command.add_option("-m,--model", options.model_dir, "Hugging Face model directory or GGUF file")
      ->required()
      ->check(existing_model_path());
  command.add_option("--device", options.device, "Device: cpu, cuda or cuda:N")
      ->capture_default_str();
  command.add_option("-t,--threads", options.threads, "CPU threads (0 = all cores)")
      ->check(at_least(0))
      ->capture_default_str();
  command.add_option("--kv-dtype", kv_dtype, "KV cache element type: bf16, f16 or f32")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}))
      ->capture_default_str();
  command
      .add_option("-c,--ctx-size", options.context,
                  "KV cache entries (0 = just enough for the request)")
      ->check(at_least(0))
      ->capture_default_str();
  add_quantize_option(command, "--quantize", options.quantize, "the model's");
  command.add_flag("--mmap", options.map_weights,
                   "CPU: read the weights from the memory-mapped files instead of aligned copies "
                   "in 2 MiB pages (less memory while loading, slower matmuls)");
}

}  // namespace specd::cli
