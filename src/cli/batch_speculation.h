// The batch engine's drafting parts for a --spec mode: per-sequence n-gram drafters and the
// batched draft model (one draft KV slot per sequence), as `serve` and `bench --concurrency` use.
#pragma once

#include <memory>
#include <string>

#include "cli/model_loader.h"
#include "cli/spec_options.h"
#include "engine/batch_draft_model.h"
#include "engine/batch_engine.h"
#include "engine/sequence_drafter.h"

namespace specd::cli {

struct BatchSpeculation {
  SequenceDrafterOptions ngram;  // mode "ngram" or "none": each sequence's own drafter
  std::shared_ptr<LoadedModel> draft;
  std::unique_ptr<BatchDraftModel> draft_model;  // nullptr without a draft model

  // Engine options for `parallel` sequences with these drafters and `spec`'s draft lengths.
  BatchEngineOptions engine_options(const SpecOptions& spec, int parallel) const;
  // One drafter per sequence (nullptr in modes without n-gram lookup).
  std::unique_ptr<Drafter> make_drafter() const { return make_sequence_drafter(ngram); }
};

// Builds the parts for `mode` (none, draft, ngram, ngram+draft). The draft model (`parallel`
// slots, see load_draft_model) is loaded into *draft once and shared by later calls. Throws
// specd::Error on an unknown mode, a missing --draft or an incompatible draft.
BatchSpeculation make_batch_speculation(const std::string& mode, const SpecOptions& spec,
                                        const LoadOptions& target_load, const ModelConfig& target,
                                        int parallel, std::shared_ptr<LoadedModel>* draft);

}  // namespace specd::cli
