// `specd info`: architecture, parameter count, dtypes and memory needs of a model directory.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_loader.h"
#include "model/gguf_model.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace specd::cli {

namespace {

struct InfoOptions {
  std::string model_dir;
  int context = 4096;
  bool json = false;
  WeightQuant quantize = WeightQuant::kNone;
};

void run_info(const InfoOptions& o) {
  ModelConfig c = load_model_config(o.model_dir);
  TensorStore store = is_gguf_model(o.model_dir) ? open_gguf_store(o.model_dir, c)
                                                 : TensorStore::open_dir(o.model_dir);
  WeightSummary w = summarize_weights(store);
  // A GGUF store maps one file; a directory store lists its safetensors files.
  const size_t files = is_gguf_model(o.model_dir) ? 1 : store.files().size();
  // Bytes the weights take once loaded (after --quantize, if given).
  const uint64_t loaded_bytes = quantized_weight_bytes(c, store, o.quantize);
  const uint64_t kv_per_token = 2ull * c.n_layers * c.kv_dim() * 2;  // K and V, bf16
  nlohmann::ordered_json dtypes = nlohmann::ordered_json::object();
  for (const auto& [name, bytes] : w.bytes_by_dtype) dtypes[name] = bytes;
  nlohmann::ordered_json out = {
      {"architecture", c.arch_name},
      {"family", architecture_name(c.arch)},
      {"parameters", w.parameters},
      {"weight_bytes", w.bytes},
      {"weight_bytes_by_dtype", dtypes},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"layers", c.n_layers},
      {"attention_heads", c.n_heads},
      {"kv_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"tied_embeddings", c.tie_word_embeddings},
      {"max_position_embeddings", c.max_position_embeddings},
      {"kv_bytes_per_token_bf16", kv_per_token},
      {"context", o.context},
      {"quantize", std::string(weight_quant_name(o.quantize))},
      {"loaded_weight_bytes", loaded_bytes},
      {"memory_bytes", loaded_bytes + kv_per_token * static_cast<uint64_t>(o.context)},
      {"files", files}};
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s (%s): %.1f M parameters, %.1f MiB of weights in %zu file(s)\n",
              c.arch_name.c_str(), architecture_name(c.arch).c_str(), w.parameters / 1e6,
              w.bytes / 1048576.0, files);
  for (const auto& [name, bytes] : w.bytes_by_dtype) {
    std::printf("  %-5s %10.1f MiB\n", name.c_str(), bytes / 1048576.0);
  }
  std::printf("layers %d, hidden %d, ffn %d, heads %d / kv %d x %d, vocab %d%s\n", c.n_layers,
              c.hidden_size, c.intermediate_size, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size,
              c.tie_word_embeddings ? ", tied embeddings" : "");
  if (o.quantize != WeightQuant::kNone) {
    std::printf("--quantize %s: %.1f MiB of weights once loaded\n",
                std::string(weight_quant_name(o.quantize)).c_str(), loaded_bytes / 1048576.0);
  }
  std::printf("memory at context %d: %.1f MiB (weights) + %.1f MiB (bf16 KV cache)\n", o.context,
              loaded_bytes / 1048576.0, kv_per_token * static_cast<double>(o.context) / 1048576.0);
}

}  // namespace

void register_info_command(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a model: architecture, size, memory");
  cmd->add_option("-m,--model", options->model_dir, "Hugging Face model directory or GGUF file")
      ->required()
      ->check(existing_model_path());
  cmd->add_option("-c,--ctx-size", options->context, "Context size for the memory estimate")
      ->check(at_least(1))
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "Print JSON");
  add_quantize_option(*cmd, "--quantize", options->quantize, "the model's");
  cmd->callback([options] { run_info(*options); });
}

}  // namespace specd::cli
