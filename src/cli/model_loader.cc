// Model loading with a progress line, and small argument parsers shared by the commands.
#include "cli/model_loader.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "model/gguf_model.h"

namespace specd::cli {

namespace {

// Reads every page of the mapped weights once (so that the first tokens are not slowed by page
// faults), showing progress on a terminal.
void prefault_weights(const TensorStore& store, bool show) {
  uint64_t total = 0;
  for (const auto& file : store.files()) total += file->mapping().size();
  show = show && isatty(fileno(stderr)) && total > (64ull << 20);
  uint64_t done = 0;
  int last_percent = -1;
  volatile uint8_t sink = 0;
  for (const auto& file : store.files()) {
    const MappedFile& mapping = file->mapping();
    const size_t step = 4096, block = 64ull << 20;
    for (size_t offset = 0; offset < mapping.size(); offset += block) {
      size_t end = std::min(mapping.size(), offset + block);
      mapping.advise_willneed(offset, end - offset);
      uint8_t acc = 0;
      for (size_t p = offset; p < end; p += step) acc ^= mapping.data()[p];
      sink = sink ^ acc;
      done += end - offset;
      int percent = static_cast<int>(100 * done / total);
      if (show && percent != last_percent) {
        std::fprintf(stderr, "\rloading weights: %3d%% (%llu / %llu MiB)", percent,
                     static_cast<unsigned long long>(done >> 20),
                     static_cast<unsigned long long>(total >> 20));
        last_percent = percent;
      }
    }
  }
  if (show) std::fprintf(stderr, "\n");
}

}  // namespace

LoadedModel load_model(const LoadOptions& options) {
  double start = now_seconds();
  LoadedModel loaded;
  loaded.config = load_model_config(options.model_dir);
  loaded.store = is_gguf_model(options.model_dir)
                     ? open_gguf_store(options.model_dir, loaded.config)
                     : TensorStore::open_dir(options.model_dir);
  prefault_weights(loaded.store, options.progress);
  int threads = options.threads > 0 ? options.threads : ThreadPool::hardware_threads();
  const Device device = parse_device(options.device);
  loaded.backend = make_backend(device, threads, options.map_weights);

  int context = options.context > 0 ? options.context : 4096;
  const int committed = context - options.context_slack;
  if (loaded.config.max_position_embeddings > 0 &&
      committed > loaded.config.max_position_embeddings) {
    SPECD_LOG_WARN("warning: context size {} exceeds the max_position_embeddings of {} ({})",
                   committed, options.model_dir, loaded.config.max_position_embeddings);
  }
  if (loaded.config.sliding_window > 0 && loaded.config.sliding_layers.empty()) {
    SPECD_CHECK(context <= loaded.config.sliding_window,
                "context size {} exceeds the model's sliding window ({}); sliding-window "
                "attention is not supported yet",
                context, loaded.config.sliding_window);
  }
  TransformerLimits limits;
  limits.max_rows = std::min(options.max_rows, context);
  limits.max_logit_rows = options.max_logit_rows;
  limits.max_positions = context;
  WeightQuantOptions quant;
  quant.mode = options.quantize;
  quant.threads = threads;
  quant.progress = options.progress;
  loaded.model =
      std::make_unique<Transformer>(*loaded.backend, loaded.config, loaded.store, limits, quant);
  // Every weight now has a copy of its own (on the GPU, or aligned on the CPU), and the binder
  // has dropped each copied tensor's whole pages; this drops the rest of the files (pages two
  // tensors share, headers, tensors the model does not use). Reads would fault them back in.
  if (device.kind != DeviceKind::kCpu || !options.map_weights) loaded.store.release_pages();
  KvCacheShape shape;
  shape.n_layers = loaded.config.n_layers;
  shape.n_kv_heads = loaded.config.n_kv_heads;
  shape.head_dim = loaded.config.head_dim;
  shape.n_slots = options.slots;
  shape.capacity = context;
  shape.dtype = options.kv_dtype;
  loaded.kv = std::make_unique<KvCache>(*loaded.backend, shape);
  loaded.load_seconds = now_seconds() - start;
  return loaded;
}

std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::string cleaned = text;
  for (char& ch : cleaned) {
    if (ch == ',' || ch == '[' || ch == ']' || ch == '\n' || ch == '\t') ch = ' ';
  }
  std::istringstream in(cleaned);
  std::vector<int32_t> ids;
  std::string item;
  while (in >> item) {
    size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SPECD_CHECK(used == item.size() && value >= 0 && value <= INT32_MAX,
                "invalid token id '{}' (expected non-negative integers like \"1,2,3\")", item);
    ids.push_back(static_cast<int32_t>(value));
  }
  SPECD_CHECK(!ids.empty(), "no token ids given");
  return ids;
}

DType parse_kv_dtype(const std::string& text) {
  if (text == "bf16") return DType::kBF16;
  if (text == "f16") return DType::kF16;
  if (text == "f32") return DType::kF32;
  fail("invalid KV cache dtype '{}' (expected bf16, f16 or f32)", text);
}

WeightSummary summarize_weights(const TensorStore& store) {
  WeightSummary summary;
  std::map<std::string, uint64_t> by_dtype;
  for (const auto& [name, info] : store.tensors()) {
    summary.parameters += static_cast<uint64_t>(info->numel());
    summary.bytes += info->end - info->begin;
    by_dtype[std::string(dtype_name(info->dtype))] += info->end - info->begin;
  }
  summary.bytes_by_dtype.assign(by_dtype.begin(), by_dtype.end());
  return summary;
}

}  // namespace specd::cli
