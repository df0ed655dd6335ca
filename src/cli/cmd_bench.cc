// `specd bench`: plain decoding and each speculative mode on the same prompts, side by side,
// with decode speed as a fraction of the memory-bandwidth roofline measured in the same run.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli/acceptance_trace.h"
#include "cli/bench_concurrent.h"
#include "cli/bench_modes.h"
#include "cli/bench_plot.h"
#include "cli/bench_prompts.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/decode_roofline.h"
#include "cli/model_loader.h"
#include "cli/prompt_source.h"
#include "cli/spec_options.h"
#include "cli/stats_json.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "engine/generator.h"
#include "git_commit.h"  // generated at build time: SPECD_GIT_COMMIT
#include "io/mapped_file.h"

namespace specd::cli {

namespace {

using OJson = nlohmann::ordered_json;

struct BenchOptions {
  LoadOptions load;
  std::string kv_dtype = "bf16";
  SpecOptions spec;
  std::string modes;  // comma-separated; default depends on --draft
  std::string prompts_file;
  int num_prompts = 0;
  int prompt_len = 128;
  int gen_len = 128;
  double temperature = 0;
  uint64_t seed = 1;
  int concurrency = 0;  // > 0: prompts through the batch engine, this many together
  bool json = false;
  std::string out;
  std::string plot;              // SVG charts of the results
  std::string acceptance_trace;  // file: acceptance lengths and costs for replaying policies
};

// One row of the table: a mode's totals over all prompts.
struct ModeResult {
  std::string mode;
  GenerationStats total;  // sums over prompts
  double decode_tokens = 0;
  bool identical = true;    // same tokens as plain decoding (meaningful at T = 0)
  double wall_seconds = 0;  // concurrent runs: the whole batch, first submission to last token
  // One prompt at a time: decode tokens per second of decoding. Concurrent: all generated tokens
  // per second of the batch (aggregate throughput, prefills included).
  double tok_s() const {
    if (wall_seconds > 0) return total.generated_tokens / wall_seconds;
    return total.decode_seconds > 0 ? decode_tokens / total.decode_seconds : 0;
  }
  // The time that draft/verify/sample fractions are taken of: in a concurrent run each sequence
  // is charged its share of every shared forward, so the shares add up to the batch's time.
  double fraction_base() const {
    return std::max(wall_seconds > 0 ? wall_seconds : total.decode_seconds, 1e-12);
  }
};

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

// Verifying k + 1 = 5 and 9 rows against one decode step (forwards continuing `prompt`). The three
// forwards take turns and each ratio is the median over rounds of its adjacent forwards: the
// machine's speed drifts, and medians taken one after another would carry the drift into a ratio.
struct VerifyCosts {
  double step_seconds = 0;  // median one-row forward
  double five_rows = 0;     // median of (5-row forward / one-row forward), adjacent pairs
  double nine_rows = 0;
};

VerifyCosts time_verification(LoadedModel& m, const std::vector<int32_t>& prompt, int rounds) {
  std::vector<double> one, five, nine;
  for (int r = 0; r < rounds; ++r) {
    const double t1 = time_forward(m, prompt, 1);
    five.push_back(time_forward(m, prompt, 5) / t1);
    nine.push_back(time_forward(m, prompt, 9) / t1);
    one.push_back(t1);
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(one), median(five), median(nine)};
}

void accumulate(ModeResult& r, const GenerationStats& s) {
  r.total.prompt_tokens += s.prompt_tokens;
  r.total.generated_tokens += s.generated_tokens;
  r.total.rounds += s.rounds;
  r.total.drafted += s.drafted;
  r.total.accepted += s.accepted;
  r.total.prefill_seconds += s.prefill_seconds;
  r.total.decode_seconds += s.decode_seconds;
  r.total.draft_seconds += s.draft_seconds;
  r.total.verify_seconds += s.verify_seconds;
  r.total.sample_seconds += s.sample_seconds;
  r.decode_tokens += s.generated_tokens - 1;
  std::vector<int>&drafted = r.total.drafted_at, &accepted = r.total.accepted_at;
  drafted.resize(std::max(drafted.size(), s.drafted_at.size()));
  accepted.resize(drafted.size());
  for (size_t i = 0; i < s.drafted_at.size(); ++i) {
    drafted[i] += s.drafted_at[i];
    accepted[i] += s.accepted_at[i];
  }
}

OJson mode_json(const ModeResult& r, double plain_tok_s) {
  const GenerationStats& t = r.total;
  const double decode = r.fraction_base();
  return {{"mode", r.mode},
          {"decode_tok_s", r.tok_s()},
          {"speedup", plain_tok_s > 0 ? r.tok_s() / plain_tok_s : 0},
          {"acceptance_length", t.rounds > 0 ? r.decode_tokens / t.rounds : 1.0},
          {"drafted", t.drafted},
          {"accepted", t.accepted},
          {"rounds", t.rounds},
          {"draft_fraction", t.draft_seconds / decode},
          {"verify_fraction", t.verify_seconds / decode},
          {"sample_fraction", t.sample_seconds / decode},
          {"acceptance_rate_by_position", acceptance_by_position(t)},
          {"identical_to_plain", r.identical},
          {"prefill_tok_s", t.prefill_seconds > 0 ? t.prompt_tokens / t.prefill_seconds : 0}};
}

// Fails now, not after the run, when `path` (if given) cannot be written.
void check_writable(const std::string& path) {
  if (path.empty()) return;
  std::ofstream file(path, std::ios::app);
  SPECD_CHECK(file.good(), "cannot write {}", path);
}

void run_bench(BenchOptions& o) {
  SPECD_CHECK(o.prompt_len >= 1 && o.gen_len >= 2, "need --prompt-len >= 1 and --gen-len >= 2");
  check_writable(o.out);
  check_writable(o.plot);
  if (o.modes.empty())
    o.modes = o.spec.draft_dir.empty() ? "ngram,ngram@4" : "draft,draft@4,ngram+draft";
  // Checked before the slow load.
  const std::vector<BenchMode> modes = parse_bench_modes(o.modes, !o.spec.draft_dir.empty());
  SPECD_CHECK(o.concurrency >= 0 && o.concurrency <= 256, "--concurrency must be 0 to 256");
  for (const BenchMode& mode : modes) {
    SPECD_CHECK(o.concurrency == 0 || mode.drafter != "oracle",
                "--concurrency runs the serving engine, which has no oracle");
  }
  // The drafter an acceptance trace records: the first mode's with one (not the oracle's).
  const auto traced = std::find_if(modes.begin(), modes.end(), [](const BenchMode& mode) {
    return mode.drafter != "none" && mode.drafter != "oracle";
  });
  SPECD_CHECK(o.acceptance_trace.empty() ||
                  (traced != modes.end() && o.temperature == 0 && o.concurrency == 0),
              "--acceptance-trace needs a drafting mode (draft, ngram or ngram+draft), "
              "--temperature 0 and no --concurrency");
  o.load.slots = std::max(1, o.concurrency);
  const int default_prompts = std::max(4, 4 * o.concurrency);  // random prompts
  o.load.kv_dtype = parse_kv_dtype(o.kv_dtype);
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_if_present(o.load.model_dir);
  ModelConfig config = load_model_config(o.load.model_dir);
  std::vector<std::vector<int32_t>> prompts =
      o.prompts_file.empty() ? random_prompts(o.num_prompts > 0 ? o.num_prompts : default_prompts,
                                              o.prompt_len, config.vocab_size, o.seed)
                             : read_prompt_file(o.prompts_file, tokenizer.get(), o.num_prompts);
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  // Room for the generated tokens and for the rows of the verification timing below (9, and
  // --draft-max + 1 for an acceptance trace).
  if (o.load.context == 0) {
    o.load.context = static_cast<int>(longest) + std::max({o.gen_len, 9, o.spec.draft_max + 1}) + 1;
  }
  o.load.progress = !o.json;
  const int threads = o.load.threads > 0 ? o.load.threads : ThreadPool::hardware_threads();
  o.load.threads = threads;
  LoadedModel target = load_model(o.load);

  SamplingParams params;
  params.temperature = o.temperature;
  std::shared_ptr<LoadedModel> draft;

  {  // warm-up
    Generator warm(*target.model, *target.kv);
    warm.generate(GenerateRequest{prompts[0], std::min(o.gen_len, 16), params, {}});
  }
  // Each mode's options: `MODE@K` fixes the draft length.
  auto mode_options = [&](const BenchMode& mode) {
    SpecOptions options = o.spec;
    if (mode.fixed_k >= 0) options.draft_fixed = mode.fixed_k;
    return options;
  };
  std::vector<std::vector<int32_t>> plain_outputs(prompts.size());
  std::vector<ModeResult> results(modes.size());
  auto record = [&](size_t m, size_t i, const GenerationResult& result) {
    ModeResult& r = results[m];
    if (m == 0)
      plain_outputs[i] = result.tokens;  // modes[0] is "none"
    else
      r.identical = r.identical && result.tokens == plain_outputs[i];
    accumulate(r, result.stats);
  };
  for (size_t m = 0; m < modes.size(); ++m) results[m].mode = modes[m].name;
  const bool progress = !o.json && isatty(fileno(stderr));  // a counter only on a terminal
  if (o.concurrency > 0) {
    // One batch run per mode, all prompts in flight together.
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::string& mode = modes[m].drafter;
      const SpecOptions options = mode_options(modes[m]);
      BatchSpeculation batch =
          make_batch_speculation(mode, options, o.load, target.config, o.concurrency, &draft);
      params.seed = o.seed;
      const std::vector<std::vector<int32_t>> warm(
          prompts.begin(), prompts.begin() + std::min<size_t>(prompts.size(), o.concurrency));
      run_concurrent(target, batch, options, o.concurrency, warm, std::min(o.gen_len, 16), params);
      ConcurrentRun run =
          run_concurrent(target, batch, options, o.concurrency, prompts, o.gen_len, params);
      results[m].wall_seconds = run.seconds;
      for (size_t i = 0; i < prompts.size(); ++i) record(m, i, run.results[i]);
    }
  } else {
    // One prompt at a time, the modes taking turns on each prompt: a drift of the machine's speed
    // (shared or throttled hosts) falls on every mode alike instead of on whichever ran then.
    std::vector<Speculation> speculations(modes.size());
    for (size_t m = 0; m < modes.size(); ++m) {
      const std::string& mode = modes[m].drafter;
      if (mode != "oracle" && mode != "none") {
        speculations[m] =
            make_speculation(mode, mode_options(modes[m]), o.load, target.config, &draft);
      }
      // Each mode's forwards are recorded (CUDA graphs) before any is timed. The oracle's
      // proposals come later; a stand-in gives its verification shapes.
      OracleDrafter stand_in({});
      Drafter* drafter = mode == "oracle" ? &stand_in : speculations[m].drafter;
      Generator(*target.model, *target.kv, drafter, mode_options(modes[m]).lengths()).warm_up();
    }
    // Each mode's draft-length policy carries what it learned from prompt to prompt, as in one
    // `specd serve` process.
    std::vector<std::shared_ptr<DraftLengthPolicy>> learned(modes.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (progress) std::fprintf(stderr, "\rprompt %zu / %zu", i + 1, prompts.size());
      params.seed = o.seed + i;
      for (size_t turn = 0; turn < modes.size(); ++turn) {
        // Plain decoding first (the oracle and the comparison need its output), then the other
        // modes in an order rotated by one each prompt: the mode right after plain decoding ran
        // measurably slower on a GPU, and this spreads that over all of them.
        const size_t m = turn == 0 ? 0 : 1 + (turn - 1 + i) % (modes.size() - 1);
        Drafter* drafter = speculations[m].drafter;
        std::unique_ptr<OracleDrafter> oracle;
        if (modes[m].drafter == "oracle") {  // the target's own output, from plain decoding
          std::vector<int32_t> sequence = prompts[i];
          sequence.insert(sequence.end(), plain_outputs[i].begin(), plain_outputs[i].end());
          oracle = std::make_unique<OracleDrafter>(sequence);
          drafter = oracle.get();
        }
        Generator generator(*target.model, *target.kv, drafter, mode_options(modes[m]).lengths());
        if (learned[m]) generator.share_draft_lengths(learned[m]);
        learned[m] = generator.draft_lengths();
        record(m, i, generator.generate(GenerateRequest{prompts[i], o.gen_len, params, {}}));
      }
    }
    if (!o.acceptance_trace.empty()) {
      Drafter& drafter = *speculations[static_cast<size_t>(traced - modes.begin())].drafter;
      write_acceptance_trace(o.acceptance_trace, target, drafter, o.spec.draft_max, prompts,
                             plain_outputs);
    }
  }
  if (!o.json) {
    if (o.concurrency == 0 && progress) std::fprintf(stderr, "\n");
    for (const ModeResult& r : results)
      std::fprintf(stderr, "%-16s %8.2f tok/s\n", r.mode.c_str(), r.tok_s());
  }

  // Cost of verifying k + 1 = 5 and 9 rows against one decode step, at the first prompt's context.
  Generator prefiller(*target.model, *target.kv);
  prefiller.prefill(prompts[0]);
  const VerifyCosts verify = time_verification(target, prompts[0], 21);
  const double one_row = verify.step_seconds;
  const double rss = peak_rss_bytes();  // before any bandwidth buffer exists
  const double token_bytes = bytes_per_decode_token(target, longest + o.gen_len / 2.0);
  const double plain_tok_s = results[0].tok_s();
  // On the host, decode steps alternate with streaming reads of the same weights (the machine's
  // bandwidth drifts); on a GPU, device-to-device copies against the plain decode rate.
  const bool host = target.backend->device().kind == DeviceKind::kCpu;
  double bandwidth = 0, roofline_fraction = 0;
  if (host) {
    const PairedRoofline paired =
        measure_paired_roofline(target.model->weights(), target.config.tie_word_embeddings, threads,
                                token_bytes, [&] { time_forward(target, prompts[0], 1); });
    bandwidth = paired.bandwidth;
    roofline_fraction = paired.fraction;
  } else {
    bandwidth = target.backend->measure_bandwidth();
    // Concurrent runs' tok/s are aggregates over sequences; the single decode step stands in.
    const double step_tok_s = o.concurrency > 0 ? 1.0 / one_row : plain_tok_s;
    roofline_fraction = step_tok_s * token_bytes / bandwidth;
  }
  const double roofline = bandwidth / token_bytes;
  const double weights = static_cast<double>(target.model->weights().bytes);
  const double kv = static_cast<double>(target.kv->bytes());

  OJson modes_json = OJson::array();
  for (const auto& r : results) modes_json.push_back(mode_json(r, plain_tok_s));
  OJson out = {
      {"device",
       target.backend->device().kind == DeviceKind::kCpu ? cpu_name() : target.backend->describe()},
      {"backend", target.backend->describe()},
      {"threads", threads},
      {"date", utc_now()},
      {"commit", SPECD_GIT_COMMIT},
      {"model",
       {{"dir", o.load.model_dir},
        {"architecture", target.config.arch_name},
        {"weight_bytes", weights},
        {"quantize", std::string(weight_quant_name(o.load.quantize))},
        {"draft_quantize", std::string(weight_quant_name(o.spec.draft_quantize))},
        {"mmap", o.load.map_weights},
        {"layers", target.config.n_layers},
        {"hidden", target.config.hidden_size},
        {"vocab", target.config.vocab_size}}},
      {"draft", o.spec.draft_dir},
      {"draft_backend", draft ? draft->backend->describe() : ""},
      {"prompts", o.prompts_file.empty() ? "random" : o.prompts_file},
      {"num_prompts", prompts.size()},
      {"concurrency", o.concurrency},
      {"generated_tokens_per_prompt", o.gen_len},
      {"temperature", o.temperature},
      {"kv_dtype", o.kv_dtype},
      {"prefill_tok_s", results[0].total.prefill_seconds > 0
                            ? results[0].total.prompt_tokens / results[0].total.prefill_seconds
                            : 0},
      {"decode_tok_s", plain_tok_s},
      {"bandwidth_gb_s", bandwidth / 1e9},
      {"bytes_per_decode_token", token_bytes},
      {"decode_roofline_tok_s", roofline},
      {"decode_roofline_fraction", roofline_fraction},
      {"roofline_method", host ? "decode steps alternating with streaming reads of the weights"
                               : "plain decode rate against device-to-device copies"},
      {"decode_step_seconds", one_row},
      {"verify5_over_decode1", verify.five_rows},
      {"verify9_over_decode1", verify.nine_rows},
      {"peak_rss_bytes", rss},
      {"weights_plus_kv_bytes", weights + kv},
      {"rss_over_weights_plus_kv", rss / (weights + kv)},
      {"modes", modes_json}};
  if (!o.out.empty()) write_text_file(o.out, out.dump(2) + "\n");
  if (!o.plot.empty()) write_text_file(o.plot, bench_plot_svg(out));
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s, %s, %zu prompts x %d tokens, T=%.2f", cpu_name().c_str(),
              target.backend->describe().c_str(), prompts.size(), o.gen_len, o.temperature);
  if (o.concurrency > 0) {
    std::printf(", %d decoding together (tok/s: all sequences' tokens per second)", o.concurrency);
  }
  std::printf("\n");
  std::printf(
      "prefill %.1f tok/s | plain decode %.2f tok/s | %s %.1f%% of the %.2f tok/s roofline "
      "(%.2f GB/s%s) | verify 5 / 9 rows = %.2fx / %.2fx one decode step | peak RSS %.0f MiB "
      "(weights + KV %.0f MiB)\n",
      out["prefill_tok_s"].get<double>(), plain_tok_s, host ? "decode step at" : "decode at",
      100 * roofline_fraction, roofline, bandwidth / 1e9, host ? ", alternating with it" : "",
      verify.five_rows, verify.nine_rows, rss / 1048576.0, (weights + kv) / 1048576.0);
  std::printf("%-16s %10s %8s %11s %7s %8s %10s\n", "mode", "tok/s", "speedup", "accept len",
              "draft%", "verify%", "identical");
  for (const auto& m : modes_json) {
    std::printf("%-16s %10.2f %7.2fx %11.2f %6.1f%% %7.1f%% %10s\n",
                m["mode"].get<std::string>().c_str(), m["decode_tok_s"].get<double>(),
                m["speedup"].get<double>(), m["acceptance_length"].get<double>(),
                100 * m["draft_fraction"].get<double>(), 100 * m["verify_fraction"].get<double>(),
                m["mode"] == "none" ? "-" : (m["identical_to_plain"].get<bool>() ? "yes" : "NO"));
  }
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Compare plain and speculative decoding on the same prompts (tok/s, speedup, "
      "acceptance, roofline)");
  add_model_options(*cmd, options->load, options->kv_dtype);
  options->spec.add_to(*cmd, false);
  cmd->add_option("--modes", options->modes,
                  "Comma-separated modes after plain decoding: ngram, draft, ngram+draft, oracle "
                  "(the target's own output as drafts); MODE@K fixes the draft length "
                  "(default: draft,draft@4,ngram+draft with --draft, else ngram,ngram@4)");
  cmd->add_option("--prompts", options->prompts_file,
                  "JSON-lines file of {\"prompt\": text} or {\"prompt_ids\": [...]}")
      ->check(CLI::ExistingFile);
  cmd->add_option("--num-prompts", options->num_prompts,
                  "Prompts to use (0 = all of the file, or 4 random ones)")
      ->check(at_least(0));
  cmd->add_option("--prompt-len", options->prompt_len, "Length of random prompts")
      ->capture_default_str();
  cmd->add_option("--gen-len", options->gen_len, "Tokens generated per prompt")
      ->capture_default_str();
  cmd->add_option("--temperature", options->temperature, "Sampling temperature (0 = greedy)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of random prompts and sampling")
      ->capture_default_str();
  cmd->add_option("--concurrency", options->concurrency,
                  "Decode this many prompts together through the serving engine (continuous "
                  "batching, as `specd serve` does) and report aggregate tok/s; 0 = one prompt "
                  "at a time")
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "Print the results as JSON");
  cmd->add_option("-o,--out", options->out, "Also write the JSON results to this file");
  cmd->add_option("--acceptance-trace", options->acceptance_trace,
                  "Write how many tokens of a --draft-max draft the target accepts at every "
                  "position of each prompt's plain output, with the measured costs of drafting "
                  "and verifying, as JSON (for replaying draft-length policies; T = 0)");
  cmd->add_option("--plot", options->plot,
                  "Also draw the results as an SVG file: tok/s of each mode against the roofline, "
                  "acceptance rate by draft position");
  cmd->callback([options] { run_bench(*options); });
}

}  // namespace specd::cli
