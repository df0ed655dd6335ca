// `specd perplexity`: exp(mean negative log-likelihood) of a token sequence in context windows.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <numeric>

#include "cli/cli_options.h"
#include "cli/commands.h"
#include "cli/model_loader.h"
#include "cli/prompt_source.h"
#include "core/error.h"
#include "io/mapped_file.h"

namespace specd::cli {

namespace {

struct PerplexityOptions {
  LoadOptions load;
  std::string kv_dtype = "bf16";
  std::string ids_file;
  std::string text_file;
  int window = 512;
};

// log softmax(logits)[target], computed in double.
double log_prob(const float* logits, int vocab, int target) {
  double max_logit = logits[0];
  for (int i = 1; i < vocab; ++i) max_logit = std::max(max_logit, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max_logit);
  return logits[target] - max_logit - std::log(sum);
}

void run_perplexity(PerplexityOptions& o) {
  std::vector<int32_t> ids;
  if (!o.text_file.empty()) {
    std::unique_ptr<Tokenizer> tokenizer = load_tokenizer_if_present(o.load.model_dir);
    SPECD_CHECK(tokenizer != nullptr, "{} has no tokenizer.json; pass token ids with --ids-file",
                o.load.model_dir);
    ids = tokenizer->encode(read_text_file(o.text_file));
  } else {
    ids = parse_token_ids(read_text_file(o.ids_file));
  }
  SPECD_CHECK(ids.size() >= 2, "need at least 2 tokens");
  SPECD_CHECK(o.window >= 2, "--window must be at least 2");
  o.load.kv_dtype = parse_kv_dtype(o.kv_dtype);
  o.load.context = o.window;
  o.load.max_rows = kSmallBatch;
  LoadedModel loaded = load_model(o.load);
  const int vocab = loaded.config.vocab_size;
  std::vector<float> logits(static_cast<size_t>(kSmallBatch) * vocab);
  std::vector<int32_t> positions(o.window);
  std::iota(positions.begin(), positions.end(), 0);
  const bool progress = isatty(fileno(stderr));  // a running figure only on a terminal
  double nll = 0;
  int64_t scored = 0;
  for (size_t start = 0; start + 1 < ids.size(); start += o.window) {
    const int n = static_cast<int>(std::min<size_t>(o.window, ids.size() - start));
    for (int begin = 0; begin < n; begin += kSmallBatch) {
      ForwardBatch batch;
      batch.n_rows = std::min<int>(kSmallBatch, n - begin);
      batch.tokens = ids.data() + start + begin;
      batch.positions = positions.data() + begin;
      Tensor out = loaded.model->forward(batch, *loaded.kv);
      loaded.backend->copy_to_host(logits.data(), out.data, out.bytes());
      for (int r = 0; r < batch.n_rows && begin + r + 1 < n; ++r) {
        int target = ids[start + begin + r + 1];
        SPECD_CHECK(target < vocab, "token id {} >= vocab size {}", target, vocab);
        nll -= log_prob(logits.data() + static_cast<size_t>(r) * vocab, vocab, target);
        ++scored;
      }
    }
    if (progress) {
      std::fprintf(stderr, "\rscored %lld tokens, perplexity %.4f", static_cast<long long>(scored),
                   std::exp(nll / scored));
    }
  }
  if (progress) std::fprintf(stderr, "\n");
  std::printf("{\"tokens_scored\": %lld, \"mean_nll\": %.6f, \"perplexity\": %.6f}\n",
              static_cast<long long>(scored), nll / scored, std::exp(nll / scored));
}

}  // namespace

void register_perplexity_command(CLI::App& app) {
  auto options = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a text or token sequence");
  add_model_options(*cmd, options->load, options->kv_dtype);
  auto* ids = cmd->add_option("--ids-file", options->ids_file, "File of token ids")
                  ->check(CLI::ExistingFile);
  auto* text =
      cmd->add_option("-f,--file", options->text_file, "Text file")->check(CLI::ExistingFile);
  ids->excludes(text);
  cmd->add_option("--window", options->window, "Tokens per context window")->capture_default_str();
  cmd->callback([options, ids, text] {
    SPECD_CHECK(ids->count() + text->count() == 1, "give --file or --ids-file");
    run_perplexity(*options);
  });
}

}  // namespace specd::cli
