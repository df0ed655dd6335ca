// Timed forwards for `specd bench`, and the acceptance trace it can record for replaying
// draft-length policies without the machine's noise.
#pragma once

#include <string>
#include <vector>

#include "cli/model_loader.h"
#include "spec/drafter.h"

namespace specd::cli {

// Seconds of one forward of `rows` rows continuing `prompt` (the cache holds it).
double time_forward(LoadedModel& m, const std::vector<int32_t>& prompt, int rows);

// Writes to `path` a JSON object recording, at T = 0, what any draft length would have gained and
// cost on these prompts. "acceptance" holds, per prompt, for every round start p = 1 ..
// outputs[i].size() - 1 (the context being the prompt and the first p output tokens), how many
// tokens of a `max_k`-token proposal by `drafter` match outputs[i] from p on (a draft of k tokens
// there has min(k, that) accepted), and "proposed" how many it proposed (fewer than max_k where a
// drafter such as n-gram lookup finds no longer continuation). "draft_seconds"[k - 1] is the
// median time of proposing k tokens one token further into the text than the proposal before,
// and "verify_seconds"[r - 1] the median time of a target forward of r rows (r <= max_k + 1), the
// forwards taking turns. `outputs` are the target's greedy continuations of `prompts`.
void write_acceptance_trace(const std::string& path, LoadedModel& target, Drafter& drafter,
                            int max_k, const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& outputs);

}  // namespace specd::cli
