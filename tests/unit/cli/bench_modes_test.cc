// parse_bench_modes: plain decoding first, drafters and MODE@K lengths read, and every bad entry
// (unknown drafter, K that is not a draft length, a draft model's mode without --draft) refused
// with a message naming it.
#include "cli/bench_modes.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace specd::cli {
namespace {

TEST(BenchModes, ReadsDraftersAndLengthsAfterPlainDecoding) {
  const auto modes = parse_bench_modes("draft,draft@4,,none,ngram+draft@0,oracle@15,ngram", true);
  ASSERT_EQ(modes.size(), 6u);
  const std::string names[] = {"none", "draft", "draft@4", "ngram+draft@0", "oracle@15", "ngram"};
  const std::string drafters[] = {"none", "draft", "draft", "ngram+draft", "oracle", "ngram"};
  const int lengths[] = {-1, -1, 4, 0, 15, -1};
  for (size_t i = 0; i < modes.size(); ++i) {
    EXPECT_EQ(modes[i].name, names[i]);
    EXPECT_EQ(modes[i].drafter, drafters[i]);
    EXPECT_EQ(modes[i].fixed_k, lengths[i]) << names[i];
  }
  EXPECT_EQ(parse_bench_modes("", false).size(), 1u);  // plain decoding alone
}

// The message of the error parse_bench_modes(text, have_draft) throws ("" if none).
std::string error_of(const std::string& text, bool have_draft = true) {
  try {
    parse_bench_modes(text, have_draft);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BenchModes, RefusesBadEntriesByName) {
  for (const char* entry : {"bogus", "Draft", "ngram+", "none@2", "@4"}) {
    EXPECT_NE(error_of(std::string("ngram,") + entry).find(std::string("unknown mode '") + entry),
              std::string::npos)
        << entry;
  }
  for (const char* entry : {"draft@", "draft@x", "draft@4x", "draft@-1", "draft@16", "oracle@99",
                            "ngram@ 4", "ngram@99999999999999999999"}) {
    EXPECT_NE(error_of(entry).find(std::string("'") + entry + "': K must be a draft length"),
              std::string::npos)
        << entry;
  }
  EXPECT_NE(error_of("ngram,draft@4", false).find("'draft@4' needs a draft model"),
            std::string::npos);
  EXPECT_NE(error_of("ngram+draft", false).find("needs a draft model"), std::string::npos);
  EXPECT_EQ(error_of("ngram@4,oracle", false), "");
}

}  // namespace
}  // namespace specd::cli
