// Loading a model directory for the commands: config, mapped weights, backend, KV cache.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/tensor_store.h"
#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "model/transformer.h"

namespace specd::cli {

struct LoadOptions {
  std::string model_dir;
  std::string device = "cpu";
  int threads = 0;        // 0 = all hardware threads
  int context = 0;        // KV entries per slot; 0 = chosen by the command
  int context_slack = 0;  // of those, entries only a draft's proposals reach (not warned about)
  int slots = 1;
  DType kv_dtype = DType::kBF16;
  int max_rows = 512;  // rows per forward (prefill chunk)
  int max_logit_rows = kSmallBatch;
  bool progress = true;                       // show a progress line while reading weights
  WeightQuant quantize = WeightQuant::kNone;  // load-time weight quantisation (--quantize)
  // CPU: read the weights from the mapped files instead of aligned copies (--mmap).
  bool map_weights = false;
};

struct LoadedModel {
  ModelConfig config;
  TensorStore store;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  double load_seconds = 0;
};

LoadedModel load_model(const LoadOptions& options);

// Parses "1,2,3", "1 2 3" or "[1, 2, 3]" into ids; throws specd::Error on anything else.
std::vector<int32_t> parse_token_ids(const std::string& text);
// Parses "bf16", "f16" or "f32".
DType parse_kv_dtype(const std::string& text);

// Number of parameters and bytes per dtype of a checkpoint.
struct WeightSummary {
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> bytes_by_dtype;
};
WeightSummary summarize_weights(const TensorStore& store);

}  // namespace specd::cli
