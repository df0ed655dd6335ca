// Owning drafters per sequence: each has its own draft KV cache and n-gram state.
#include "engine/sequence_drafter.h"

#include "core/error.h"
#include "spec/chained_drafter.h"
#include "spec/model_drafter.h"
#include "spec/ngram_drafter.h"

namespace specd {

namespace {

class OwningDrafter final : public Drafter {
 public:
  OwningDrafter(const SequenceDrafterOptions& o) {
    const bool ngram = o.mode == "ngram" || o.mode == "ngram+draft";
    const bool model = o.mode == "draft" || o.mode == "ngram+draft";
    if (ngram) ngram_ = std::make_unique<NgramDrafter>(o.ngram_min, o.ngram_max);
    if (model) {
      SPECD_CHECK(o.draft_model != nullptr, "speculation mode {} needs a draft model", o.mode);
      cache_ = std::make_unique<KvCache>(o.draft_model->backend(), o.draft_cache);
      model_ =
          std::make_unique<ModelDrafter>(*o.draft_model, *cache_, o.target_vocab, o.max_k, o.p_min);
    }
    if (ngram_ && model_) {
      chained_ =
          std::make_unique<ChainedDrafter>(std::vector<Drafter*>{ngram_.get(), model_.get()});
      active_ = chained_.get();
    } else if (ngram_) {
      active_ = ngram_.get();
    } else {
      active_ = model_.get();
    }
  }
  std::string name() const override { return active_->name(); }
  void reset() override { active_->reset(); }
  void propose(std::span<const int32_t> context, int max_k, const SamplingParams& params,
               DraftProposal& out) override {
    active_->propose(context, max_k, params, out);
  }
  bool uses_model() const override { return active_->uses_model(); }

 private:
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<NgramDrafter> ngram_;
  std::unique_ptr<ModelDrafter> model_;
  std::unique_ptr<ChainedDrafter> chained_;
  Drafter* active_ = nullptr;
};

}  // namespace

std::unique_ptr<Drafter> make_sequence_drafter(const SequenceDrafterOptions& options) {
  if (options.mode == "none" || options.mode.empty()) return nullptr;
  SPECD_CHECK(options.mode == "draft" || options.mode == "ngram" || options.mode == "ngram+draft",
              "unknown speculation mode '{}' (expected none, draft, ngram or ngram+draft)",
              options.mode);
  return std::make_unique<OwningDrafter>(options);
}

}  // namespace specd
