// A drafter that owns its parts, so that every sequence of a batch has its own drafting state.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/transformer.h"
#include "spec/drafter.h"

namespace specd {

struct SequenceDrafterOptions {
  std::string mode = "none";  // none, draft, ngram, ngram+draft
  int ngram_min = 1, ngram_max = 4;
  Transformer* draft_model = nullptr;  // needed by draft and ngram+draft; shared, not owned
  KvCacheShape draft_cache;            // shape of one sequence's draft cache (one slot)
  int target_vocab = 0;
  int max_k = 8;
  double p_min = 0.0;
};

// A new drafter for one sequence: n-gram lookup, a draft model with its own KV cache, or both
// chained (n-gram first). Returns nullptr for mode "none". Throws specd::Error on a bad mode.
std::unique_ptr<Drafter> make_sequence_drafter(const SequenceDrafterOptions& options);

}  // namespace specd
