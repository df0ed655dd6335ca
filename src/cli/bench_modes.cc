// Parsing of `specd bench --modes`: drafters and fixed draft lengths, checked up front.
#include "cli/bench_modes.h"

#include <charconv>
#include <sstream>

#include "backend/backend.h"  // kSmallBatch
#include "core/error.h"

namespace specd::cli {

namespace {

constexpr const char* kDrafters[] = {"ngram", "draft", "ngram+draft", "oracle"};

BenchMode parse_mode(const std::string& entry, bool have_draft) {
  BenchMode mode{entry, entry.substr(0, entry.find('@')), -1};
  bool known = false;
  for (const char* drafter : kDrafters) known = known || mode.drafter == drafter;
  SPECD_CHECK(known,
              "--modes: unknown mode '{}' (modes: ngram, draft, ngram+draft, oracle, each "
              "optionally as MODE@K)",
              entry);
  SPECD_CHECK(have_draft || (mode.drafter != "draft" && mode.drafter != "ngram+draft"),
              "--modes: '{}' needs a draft model (--draft DIR)", entry);
  if (mode.drafter.size() == entry.size()) return mode;
  const std::string k = entry.substr(mode.drafter.size() + 1);
  const char* end = k.data() + k.size();
  const auto [stop, status] = std::from_chars(k.data(), end, mode.fixed_k);
  SPECD_CHECK(!k.empty() && status == std::errc() && stop == end && mode.fixed_k >= 0 &&
                  mode.fixed_k < kSmallBatch,
              "--modes: '{}': K must be a draft length from 0 to {}", entry, kSmallBatch - 1);
  return mode;
}

}  // namespace

std::vector<BenchMode> parse_bench_modes(const std::string& text, bool have_draft) {
  std::vector<BenchMode> modes = {{"none", "none", -1}};
  std::stringstream in(text);
  std::string entry;
  while (std::getline(in, entry, ',')) {
    if (!entry.empty() && entry != "none") modes.push_back(parse_mode(entry, have_draft));
  }
  return modes;
}

}  // namespace specd::cli
