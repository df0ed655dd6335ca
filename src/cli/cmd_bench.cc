// `specd bench`: prefill and decode speed, with decode as a fraction of the measured roofline.
#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>

#include "cli/commands.h"
#include "cli/memory_bandwidth.h"
#include "cli/model_loader.h"
#include "cli/cli_options.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/generator.h"
#include "io/mapped_file.h"

namespace specd::cli {

namespace {

struct BenchOptions {
  LoadOptions load;
  std::string kv_dtype = "bf16";
  int prompt_len = 128;
  int gen_len = 128;
  int reps = 3;
  uint64_t seed = 1;
  bool json = false;
  std::string out;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string cpu_name() {
  try {
    std::string info = read_text_file("/proc/cpuinfo");
    size_t at = info.find("model name");
    if (at != std::string::npos) {
      size_t colon = info.find(':', at), end = info.find('\n', at);
      return info.substr(colon + 2, end - colon - 2);
    }
  } catch (const Error&) {
  }
  return "unknown cpu";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return text;
}

double peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss * 1024.0;
}

// Bytes one decode step must read: every weight except the embedding table (one row of it),
// plus the K/V entries of the average context.
double bytes_per_decode_token(const LoadedModel& m, double avg_context) {
  const ModelWeights& w = m.model->weights();
  double bytes = static_cast<double>(w.bytes);
  if (!m.config.tie_word_embeddings) bytes -= static_cast<double>(w.embed.bytes());
  double kv_entry = 2.0 * m.config.n_layers * m.config.kv_dim() * dtype_size(m.kv->shape().dtype);
  return bytes + kv_entry * avg_context;
}

void run_bench(BenchOptions& o) {
  SPECD_CHECK(o.prompt_len >= 1 && o.gen_len >= 2 && o.reps >= 1,
              "need --prompt-len >= 1, --gen-len >= 2 and --reps >= 1");
  o.load.kv_dtype = parse_kv_dtype(o.kv_dtype);
  if (o.load.context == 0) o.load.context = o.prompt_len + o.gen_len;
  o.load.progress = !o.json;
  const int threads = o.load.threads > 0 ? o.load.threads : ThreadPool::hardware_threads();
  o.load.threads = threads;
  LoadedModel loaded = load_model(o.load);

  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::uniform_int_distribution<int32_t> pick(0, loaded.config.vocab_size - 1);
  GenerateRequest request;
  for (int i = 0; i < o.prompt_len; ++i) request.prompt.push_back(pick(rng));
  request.max_tokens = o.gen_len;
  request.sampling.temperature = 0;

  Generator generator(*loaded.model, *loaded.kv);
  std::vector<double> prefill, decode;
  for (int r = 0; r < o.reps + 1; ++r) {  // the first run warms up
    GenerationResult result = generator.generate(request);
    if (r == 0) continue;
    prefill.push_back(result.stats.prefill_tok_s());
    decode.push_back(result.stats.decode_tok_s());
  }
  const double rss = peak_rss_bytes();  // before the bandwidth buffer is allocated
  const double bandwidth = measure_read_bandwidth(threads);
  const double token_bytes = bytes_per_decode_token(loaded, o.prompt_len + o.gen_len / 2.0);
  const double roofline = bandwidth / token_bytes;
  const double decode_tok_s = median(decode), prefill_tok_s = median(prefill);
  const double weights = static_cast<double>(loaded.model->weights().bytes);
  const double kv = static_cast<double>(loaded.kv->bytes());

  nlohmann::ordered_json out = {
      {"device", cpu_name()},
      {"backend", loaded.backend->describe()},
      {"threads", threads},
      {"date", utc_now()},
      {"commit", SPECD_GIT_COMMIT},
      {"model",
       {{"dir", o.load.model_dir},
        {"architecture", loaded.config.arch_name},
        {"weight_bytes", weights},
        {"layers", loaded.config.n_layers},
        {"hidden", loaded.config.hidden_size},
        {"vocab", loaded.config.vocab_size}}},
      {"prompt_tokens", o.prompt_len},
      {"generated_tokens", o.gen_len},
      {"repetitions", o.reps},
      {"kv_dtype", o.kv_dtype},
      {"prefill_tok_s", prefill_tok_s},
      {"decode_tok_s", decode_tok_s},
      {"read_bandwidth_gb_s", bandwidth / 1e9},
      {"bytes_per_decode_token", token_bytes},
      {"decode_roofline_tok_s", roofline},
      {"decode_roofline_fraction", decode_tok_s / roofline},
      {"peak_rss_bytes", rss},
      {"kv_cache_bytes", kv},
      {"rss_over_weights_plus_kv", rss / (weights + kv)}};
  if (!o.out.empty()) {
    std::ofstream file(o.out);
    SPECD_CHECK(file.good(), "cannot write {}", o.out);
    file << out.dump(2) << "\n";
  }
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s, %s\n", cpu_name().c_str(), loaded.backend->describe().c_str());
  std::printf("%-28s %10s\n", "metric", "value");
  std::printf("%-28s %10.1f\n", "prefill tok/s", prefill_tok_s);
  std::printf("%-28s %10.2f\n", "decode tok/s", decode_tok_s);
  std::printf("%-28s %10.2f\n", "read bandwidth GB/s", bandwidth / 1e9);
  std::printf("%-28s %10.2f\n", "decode roofline tok/s", roofline);
  std::printf("%-28s %9.1f%%\n", "decode / roofline", 100 * decode_tok_s / roofline);
  std::printf("%-28s %10.1f\n", "peak RSS MiB", rss / 1048576.0);
  std::printf("%-28s %10.1f\n", "weights + KV MiB", (weights + kv) / 1048576.0);
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure prefill and decode speed against the memory-bandwidth roofline");
  add_model_options(*cmd, options->load, options->kv_dtype);
  cmd->add_option("--prompt-len", options->prompt_len, "Prompt tokens (random ids)")
      ->capture_default_str();
  cmd->add_option("--gen-len", options->gen_len, "Generated tokens per run")
      ->capture_default_str();
  cmd->add_option("--reps", options->reps, "Timed repetitions (after one warm-up)")
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of the random prompt")->capture_default_str();
  cmd->add_flag("--json", options->json, "Print the results as JSON");
  cmd->add_option("-o,--out", options->out, "Also write the JSON results to this file");
  cmd->callback([options] { run_bench(*options); });
}

}  // namespace specd::cli
