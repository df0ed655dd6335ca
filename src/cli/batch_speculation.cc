// Builds the batch engine's drafting parts from the command line (see batch_speculation.h).
#include "cli/batch_speculation.h"

#include "core/error.h"

namespace specd::cli {

BatchEngineOptions BatchSpeculation::engine_options(const SpecOptions& spec, int parallel) const {
  BatchEngineOptions options;
  options.parallel = parallel;
  options.draft_length = spec.lengths();
  options.sampled_draft_k = spec.draft_fixed;
  options.draft_model = draft_model.get();
  return options;
}

BatchSpeculation make_batch_speculation(const std::string& mode, const SpecOptions& spec,
                                        const LoadOptions& target_load, const ModelConfig& target,
                                        int parallel, std::shared_ptr<LoadedModel>* draft) {
  SPECD_CHECK(mode == "none" || mode == "draft" || mode == "ngram" || mode == "ngram+draft",
              "unknown --spec '{}'", mode);
  BatchSpeculation s;
  s.ngram.mode = mode == "none" || mode == "draft" ? "none" : "ngram";
  s.ngram.ngram_min = spec.ngram_min;
  s.ngram.ngram_max = spec.ngram_max;
  SPECD_CHECK(spec.ngram_min <= spec.ngram_max, "--ngram-min exceeds --ngram-max");
  if (mode == "draft" || mode == "ngram+draft") {
    SPECD_CHECK(!spec.draft_dir.empty(), "--spec {} needs --draft DIR", mode);
    if (!*draft) {
      *draft = std::make_shared<LoadedModel>(load_draft_model(spec, target_load, target, parallel));
    }
    s.draft = *draft;
    s.draft_model = std::make_unique<BatchDraftModel>(*s.draft->model, *s.draft->kv,
                                                      target.vocab_size, spec.draft_p_min);
  }
  return s;
}

}  // namespace specd::cli
