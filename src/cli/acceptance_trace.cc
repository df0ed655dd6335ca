// Timed forwards and the acceptance trace of `specd bench --acceptance-trace`.
#include "cli/acceptance_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/timer.h"
#include "engine/generator.h"
#include "io/mapped_file.h"

namespace specd::cli {

namespace {

double median_seconds(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// prompt + the first n tokens of output.
std::vector<int32_t> context_of(const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>& output, size_t n) {
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), output.begin(), output.begin() + static_cast<ptrdiff_t>(n));
  return context;
}

// Seconds of drafter.propose(context, k) and the tokens it proposed.
double time_proposal(Drafter& drafter, const std::vector<int32_t>& context, int k,
                     DraftProposal& proposal) {
  const SamplingParams greedy;
  proposal.clear();
  const double start = now_seconds();
  drafter.propose(context, k, greedy, proposal);
  return now_seconds() - start;
}

}  // namespace

double time_forward(LoadedModel& m, const std::vector<int32_t>& prompt, int rows) {
  std::vector<int32_t> tokens(rows), positions(rows);
  for (int i = 0; i < rows; ++i) {
    tokens[i] = prompt[i % prompt.size()];
    positions[i] = static_cast<int32_t>(prompt.size()) + i;
  }
  ForwardBatch batch{rows, tokens.data(), positions.data()};
  const double start = now_seconds();
  m.model->forward(batch, *m.kv);
  m.backend->synchronize();
  return now_seconds() - start;
}

void write_acceptance_trace(const std::string& path, LoadedModel& target, Drafter& drafter,
                            int max_k, const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& outputs) {
  SPECD_CHECK(max_k >= 1 && !prompts.empty() && prompts.size() == outputs.size(),
              "an acceptance trace needs a draft length and the prompts' outputs");
  DraftProposal proposal;
  proposal.tokens.reserve(max_k);
  nlohmann::ordered_json acceptance = nlohmann::ordered_json::array();
  nlohmann::ordered_json proposed = nlohmann::ordered_json::array();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t>& out = outputs[i];
    std::vector<int> lengths, sizes;
    drafter.reset();
    drafter.prefill(prompts[i]);
    for (size_t p = 1; p < out.size(); ++p) {
      time_proposal(drafter, context_of(prompts[i], out, p), max_k, proposal);
      int n = 0;
      while (n < proposal.size() && p + n < out.size() && proposal.tokens[n] == out[p + n]) ++n;
      lengths.push_back(n);
      sizes.push_back(proposal.size());
    }
    acceptance.push_back(lengths);
    proposed.push_back(sizes);
  }

  // Drafting k tokens one token further into the first prompt's output each time, as a round
  // does after the one before; verifying r rows at the first prompt's context.
  const std::vector<int32_t>& out = outputs[0];
  const size_t positions = std::min<size_t>(out.size(), 33);
  std::vector<double> draft_seconds, verify_seconds;
  for (int k = 1; k <= max_k; ++k) {
    std::vector<double> times;
    drafter.reset();
    drafter.prefill(prompts[0]);
    for (size_t p = 1; p < positions; ++p) {
      const double t = time_proposal(drafter, context_of(prompts[0], out, p), k, proposal);
      if (p > 1) times.push_back(t);  // the first also catches up on the prompt's output
    }
    draft_seconds.push_back(median_seconds(times));
  }
  Generator(*target.model, *target.kv).prefill(prompts[0]);
  std::vector<std::vector<double>> rows(max_k + 1);
  for (int round = 0; round < 11; ++round) {
    for (int r = 1; r <= max_k + 1; ++r) rows[r - 1].push_back(time_forward(target, prompts[0], r));
  }
  for (auto& times : rows) verify_seconds.push_back(median_seconds(times));

  nlohmann::ordered_json trace = {{"max_k", max_k},
                                  {"draft_seconds", draft_seconds},
                                  {"verify_seconds", verify_seconds},
                                  {"acceptance", acceptance},
                                  {"proposed", proposed}};
  write_text_file(path, trace.dump() + "\n");
}

}  // namespace specd::cli
