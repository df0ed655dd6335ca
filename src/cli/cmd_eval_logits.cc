// `specd eval-logits`: teacher-forced f32 logits of a token sequence, saved as .npy.
#include <cstdio>
#include <numeric>
#include <vector>

#include "cli/commands.h"
#include "cli/cli_options.h"
#include "cli/model_loader.h"
#include "core/error.h"
#include "core/npy.h"

namespace specd::cli {

namespace {

struct EvalOptions {
  LoadOptions load;
  std::string kv_dtype = "f32";
  std::string prompt_ids;
  std::string out;
};

void run_eval(EvalOptions& o) {
  std::vector<int32_t> ids = parse_token_ids(o.prompt_ids);
  const int n = static_cast<int>(ids.size());
  o.load.kv_dtype = parse_kv_dtype(o.kv_dtype);
  if (o.load.context == 0) o.load.context = n;
  SPECD_CHECK(n <= o.load.context, "{} tokens exceed --ctx-size {}", n, o.load.context);
  o.load.max_rows = kSmallBatch;  // the decode kernels: logits equal those of generation
  LoadedModel loaded = load_model(o.load);
  const int vocab = loaded.config.vocab_size;
  for (int32_t id : ids) SPECD_CHECK(id < vocab, "token id {} >= vocab size {}", id, vocab);
  std::vector<float> logits(static_cast<size_t>(n) * vocab);  // [n, vocab]
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  for (int begin = 0; begin < n; begin += kSmallBatch) {
    ForwardBatch batch;
    batch.n_rows = std::min<int>(kSmallBatch, n - begin);
    batch.tokens = ids.data() + begin;
    batch.positions = positions.data() + begin;
    Tensor out = loaded.model->forward(batch, *loaded.kv);
    loaded.backend->copy_to_host(logits.data() + static_cast<size_t>(begin) * vocab, out.data,
                                 out.bytes());
  }
  write_npy_f32(o.out, logits.data(), {n, vocab});
  std::fprintf(stderr, "wrote logits [%d, %d] to %s\n", n, vocab, o.out.c_str());
}

}  // namespace

void register_eval_logits_command(CLI::App& app) {
  auto options = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval-logits", "Write teacher-forced f32 logits [n_tokens, vocab] of a sequence as .npy");
  add_model_options(*cmd, options->load, options->kv_dtype);
  cmd->add_option("--prompt-ids", options->prompt_ids, "Token ids, e.g. \"1,2,3\"")->required();
  cmd->add_option("-o,--out", options->out, "Output .npy file")->required();
  cmd->callback([options] { run_eval(*options); });
}

}  // namespace specd::cli
