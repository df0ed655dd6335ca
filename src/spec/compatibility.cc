// Draft/target compatibility: tokenizer vocabularies, special tokens and eos ids must agree.
#include "spec/compatibility.h"

#include "core/error.h"
#include "io/json_file.h"
#include "io/mapped_file.h"

namespace specd {

namespace {

// The parts of tokenizer.json that define token ids.
Json token_identity(const std::string& dir) {
  Json tokenizer = read_json_file(dir + "/tokenizer.json");
  Json identity = Json::object();
  if (tokenizer.contains("model") && tokenizer["model"].contains("vocab")) {
    identity["vocab"] = tokenizer["model"]["vocab"];
  }
  if (tokenizer.contains("added_tokens")) {
    Json added = Json::array();
    for (const auto& t : tokenizer["added_tokens"]) {
      added.push_back({t.value("id", -1), t.value("content", std::string())});
    }
    identity["added_tokens"] = added;
  }
  return identity;
}

}  // namespace

void check_draft_compatible(const std::string& target_dir, const ModelConfig& target,
                            const std::string& draft_dir, const ModelConfig& draft) {
  bool target_has = file_exists(target_dir + "/tokenizer.json");
  bool draft_has = file_exists(draft_dir + "/tokenizer.json");
  if (target_has && draft_has) {
    SPECD_CHECK(token_identity(target_dir) == token_identity(draft_dir),
                "draft model {} uses a different tokenizer than the target {} (vocabularies or "
                "special tokens differ)",
                draft_dir, target_dir);
  } else {
    SPECD_CHECK(target.vocab_size == draft.vocab_size,
                "draft vocab_size {} differs from the target's {} and there is no tokenizer.json "
                "to prove they share a tokenizer",
                draft.vocab_size, target.vocab_size);
  }
  SPECD_CHECK(target.eos_token_ids.empty() || draft.eos_token_ids.empty() ||
                  target.eos_token_ids[0] == draft.eos_token_ids[0],
              "draft eos token {} differs from the target's {}", draft.eos_token_ids[0],
              target.eos_token_ids[0]);
}

}  // namespace specd
