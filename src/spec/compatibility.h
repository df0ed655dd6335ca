// Checks that a draft model can propose tokens for a target (same tokenizer).
#pragma once

#include <string>

#include "model/model_config.h"

namespace specd {

// Throws specd::Error with the reason when the draft's vocabulary or special tokens differ from
// the target's. A padded vocab_size is tolerated when the tokenizer files agree.
void check_draft_compatible(const std::string& target_dir, const ModelConfig& target,
                            const std::string& draft_dir, const ModelConfig& draft);

}  // namespace specd
