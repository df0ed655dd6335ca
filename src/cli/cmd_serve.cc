// `specd serve`: the OpenAI-compatible HTTP server over a continuous-batching engine.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "chat/chat_template.h"
#include "cli/batch_speculation.h"
#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_source.h"
#include "cli/spec_options.h"
#include "core/error.h"
#include "core/timer.h"
#include "engine/batch_engine.h"
#include "io/mapped_file.h"
#include "server/server.h"

namespace specd::cli {

namespace {

struct ServeOptions {
  LoadOptions load;
  std::string kv_dtype = "bf16";
  SpecOptions spec;
  server::ServerOptions http;
  int parallel = 4;
  std::string chat_template_file;
  std::string served_name;
  int max_body_mb = 4;
  double drain_seconds = 30;
  int prefix_cache_mb = 0;
};

std::string base_name(const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  size_t slash = d.find_last_of('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

// Waits for SIGTERM/SIGINT, then drains: new requests get 503, in-flight ones finish (or are
// cancelled after the drain timeout), then the listener stops.
// The write end of a pipe the signal handler writes the signal number into (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signal_number) {
  unsigned char byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

void drain_on_signal(server::Server& http, BatchEngine& engine, double drain_seconds) {
  unsigned char byte = 0;
  while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  const int signal_number = byte;
  if (signal_number == 0) return;  // the server ended by itself
  std::fprintf(stderr, "specd serve: signal %d, draining (up to %.0f s)\n", signal_number,
               drain_seconds);
  http.begin_drain();
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(drain_seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    BatchEngineSnapshot s = engine.snapshot();
    if (s.active == 0 && s.waiting == 0 && http.in_flight() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  engine.stop();  // cancels whatever is left, so every handler can answer
  while (http.in_flight() > 0 &&
         std::chrono::steady_clock::now() < deadline + std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  http.stop();
}

void run_serve(ServeOptions& o) {
  SPECD_CHECK(o.parallel >= 1 && o.parallel <= 256, "--parallel must be between 1 and 256");
  o.load.kv_dtype = parse_kv_dtype(o.kv_dtype);
  o.load.slots = o.parallel;
  ModelConfig config = load_model_config(o.load.model_dir);
  if (o.load.context == 0) {
    o.load.context =
        config.max_position_embeddings > 0 ? std::min(4096, config.max_position_embeddings) : 4096;
  }
  SPECD_CHECK(file_exists(o.load.model_dir + "/tokenizer.json"),
              "{} has no tokenizer.json; the server needs one", o.load.model_dir);
  Tokenizer tokenizer = Tokenizer::load(o.load.model_dir);

  // SIGTERM/SIGINT only wake the drain thread (through a pipe), whichever thread gets them.
  SPECD_CHECK(pipe(g_signal_pipe) == 0, "cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  o.load.progress = true;
  LoadedModel target = load_model(o.load);
  // Each sequence gets its own n-gram drafter; draft-model proposals are batched over the
  // sequences (one draft KV slot each).
  const std::string mode = o.spec.resolved_mode();
  std::shared_ptr<LoadedModel> draft;
  BatchSpeculation speculation =
      make_batch_speculation(mode, o.spec, o.load, target.config, o.parallel, &draft);
  BatchEngineOptions engine_options = speculation.engine_options(o.spec, o.parallel);
  std::unique_ptr<PrefixCache> prefix_cache;
  if (o.prefix_cache_mb > 0) {
    prefix_cache =
        std::make_unique<PrefixCache>(*target.backend, *target.kv, target.model->limits().max_rows,
                                      static_cast<size_t>(o.prefix_cache_mb) << 20);
    engine_options.prefix_cache = prefix_cache.get();
  }
  BatchEngine engine(*target.model, *target.kv, engine_options,
                     [&speculation] { return speculation.make_drafter(); });
  const double warm_up_start = now_seconds();
  engine.warm_up();  // CUDA graphs of the decode shapes, before the first request
  if (target.backend->records_forwards()) {
    std::fprintf(stderr, "specd serve: decode forwards recorded in %.1f s\n",
                 now_seconds() - warm_up_start);
  }

  server::ServerModel model;
  model.engine = &engine;
  model.tokenizer = &tokenizer;
  model.context = o.load.context;
  model.stop_tokens = target.config.eos_token_ids;
  if (tokenizer.eos_id()) model.stop_tokens.push_back(*tokenizer.eos_id());
  SamplingParams defaults;  // OpenAI's defaults (temperature 1), or generation_config.json's
  defaults.temperature = 1.0;
  if (target.config.do_sample) defaults = SamplingOptions{}.resolve(target.config);
  model.default_sampling = defaults;
  std::unique_ptr<ChatTemplate> chat_template;
  if (!o.chat_template_file.empty()) {
    chat_template = std::make_unique<ChatTemplate>(read_text_file(o.chat_template_file));
    if (tokenizer.bos_id())
      model.render_defaults.bos_token = tokenizer.token_text(*tokenizer.bos_id());
    if (tokenizer.eos_id())
      model.render_defaults.eos_token = tokenizer.token_text(*tokenizer.eos_id());
  } else if (!tokenizer.chat_template().empty()) {
    chat_template = std::make_unique<ChatTemplate>(
        load_chat_template(o.load.model_dir, &model.render_defaults));
  }
  model.chat_template = chat_template.get();

  o.http.model_id = o.served_name.empty() ? base_name(o.load.model_dir) : o.served_name;
  o.http.drafter = mode;
  o.http.max_body_bytes = static_cast<size_t>(o.max_body_mb) << 20;
  o.http.http_threads = std::max(o.http.http_threads, 2 * o.parallel + 8);
  server::Server http(o.http, model);
  const int port = http.bind();
  engine.start();
  http.set_ready(true);

  uint64_t bytes = target.model->weights().bytes + target.kv->bytes();
  if (speculation.draft) {
    bytes += speculation.draft->model->weights().bytes + speculation.draft->kv->bytes();
  }
  std::fprintf(
      stderr,
      "specd serve: http://%s:%d/v1 | model %s (%s) | drafter %s | parallel %d | "
      "context %d | memory %.1f MiB (weights + KV) | prefix cache %d MiB | chat "
      "template: %s\n",
      o.http.host.c_str(), port, o.http.model_id.c_str(), o.load.model_dir.c_str(), mode.c_str(),
      o.parallel, o.load.context, bytes / 1048576.0, o.prefix_cache_mb,
      chat_template ? "yes" : "none (chat completions are refused; pass --chat-template FILE)");
  std::thread signal_thread([&] { drain_on_signal(http, engine, o.drain_seconds); });
  bool ok = http.listen();
  unsigned char zero = 0;  // wakes the drain thread if the server ended by itself
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &zero, 1);
  signal_thread.join();
  engine.stop();
  std::fprintf(stderr, "specd serve: stopped\n");
  SPECD_CHECK(ok, "the server stopped with an error");
}

}  // namespace

void register_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  add_model_options(*cmd, o->load, o->kv_dtype);
  o->spec.add_to(*cmd);
  cmd->add_option("--host", o->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", o->http.api_key,
                  "Require 'Authorization: Bearer KEY' (default: $SPECD_API_KEY, else none)")
      ->envname("SPECD_API_KEY");
  cmd->add_option("--parallel", o->parallel, "Sequences decoded together")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat_template_file,
                  "Jinja chat template file (default: the model's own)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--served-model-name", o->served_name,
                  "Model name clients send (default: the model directory's name)");
  cmd->add_option("--max-body-mb", o->max_body_mb, "Largest request body in MiB")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http.http_threads,
                  "Connections served at once (at least 2 x --parallel + 8)")
      ->check(CLI::Range(4, 4096))
      ->capture_default_str();
  cmd->add_option("--max-tokens", o->http.max_tokens_default,
                  "Default max_tokens when a request gives none (0 = to the end of the context)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--prefix-cache-mb", o->prefix_cache_mb,
                  "Host memory for reusing the K/V of earlier prompts' leading chunks (0 = off)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", o->drain_seconds,
                  "Seconds in-flight requests get to finish after SIGTERM")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace specd::cli
