// SentencePiece-style GGUF tokenizers: merges recovered from scores, and clear errors (never a
// crash) on hostile metadata.
#include "tokenizer/gguf_spm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "tokenizer/spm_merges.h"
#include "tokenizer/tokenizer_impl.h"

namespace specd {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

GgufValue string_value(const std::string& s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = s;
  return v;
}

GgufValue strings_value(const std::vector<std::string>& list) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kString;
  v.strings = list;
  return v;
}

template <typename T>
GgufValue scalars_value(GgufType type, const std::vector<T>& list) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = type;
  v.raw.resize(list.size() * sizeof(T));
  if (!list.empty()) std::memcpy(v.raw.data(), list.data(), v.raw.size());
  return v;
}

GgufValue u32_value(uint32_t x) {
  GgufValue v;
  v.type = GgufType::kU32;
  v.u = x;
  return v;
}

// A small valid Llama-style header: "▁", "a", "b", "▁a", "ab", "▁ab", byte tokens for ASCII.
GgufHeader llama_header() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (const char* piece : {"\xE2\x96\x81"
                            "ab",
                            "\xE2\x96\x81"
                            "a",
                            "ab", "\xE2\x96\x81", "a", "b"}) {
    tokens.push_back(piece);
    scores.push_back(-static_cast<float>(tokens.size()));
    types.push_back(1);
  }
  GgufHeader h;
  h.metadata["general.architecture"] = string_value("llama");
  h.metadata["tokenizer.ggml.model"] = string_value("llama");
  h.metadata["tokenizer.ggml.tokens"] = strings_value(tokens);
  h.metadata["tokenizer.ggml.scores"] = scalars_value(GgufType::kF32, scores);
  h.metadata["tokenizer.ggml.token_type"] = scalars_value(GgufType::kI32, types);
  h.metadata["tokenizer.ggml.bos_token_id"] = u32_value(1);
  h.metadata["tokenizer.ggml.eos_token_id"] = u32_value(2);
  h.metadata["tokenizer.ggml.unknown_token_id"] = u32_value(0);
  return h;
}

std::string build_error(const GgufHeader& h) {
  try {
    Json config;
    tok::TokenizerJson parsed = tok::gguf_spm_tokenizer(h, "test.gguf", config);
    tok::build_tokenizer(std::move(parsed), std::move(config), "");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpmMerges, OrderedByScoreThenLengthsThenVocabulary) {
  // Expected from transformers.tokenization_utils_base.generate_merges on the same input.
  const std::vector<std::string> tokens = {"a", "b", "c", "ab", "bc", "abc", "ca", "abca", "a"};
  const std::vector<double> scores = {0, 0, 0, -1, -1, -2, -1, -2, 5};
  const Merges want = {{"a", "b"},   {"b", "c"},  {"c", "a"}, {"abc", "a"},
                       {"ab", "ca"}, {"ab", "c"}, {"a", "bc"}};
  EXPECT_EQ(tok::merges_from_scores(tokens, scores), want);
}

TEST(SpmMerges, SplitsAtCodePointsNotBytes) {
  const std::vector<std::string> tokens = {"\xC3\xA9", "x", "\xC3\xA9x"};
  const Merges want = {{"\xC3\xA9", "x"}};
  EXPECT_EQ(tok::merges_from_scores(tokens, {0, 0, -1}), want);
}

TEST(GgufSpm, EncodesTheSmallHeader) {
  GgufHeader h = llama_header();
  Json config;
  tok::TokenizerJson parsed = tok::gguf_spm_tokenizer(h, "test.gguf", config);
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["add_bos_token"], true);
  auto impl = tok::build_tokenizer(std::move(parsed), std::move(config), "");
  std::vector<int32_t> ids;
  impl->encode_segment("ab ab", true, ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 3}));  // "▁ab" twice (Metaspace prepends "▁")
}

TEST(GgufSpm, RejectsHostileMetadata) {
  auto expect = [](GgufHeader h, const std::string& needle) {
    const std::string error = build_error(h);
    EXPECT_NE(error.find(needle), std::string::npos) << "got: " << error;
  };
  GgufHeader h = llama_header();
  h.metadata.erase("tokenizer.ggml.tokens");
  expect(h, "no tokenizer.ggml.tokens");

  h = llama_header();
  h.metadata["tokenizer.ggml.tokens"] = strings_value({});
  expect(h, "tokenizer.ggml.tokens is empty");

  h = llama_header();
  h.metadata["tokenizer.ggml.scores"] = scalars_value(GgufType::kF32, std::vector<float>{0, 1});
  expect(h, "2 scores for 9 tokens");

  h = llama_header();
  h.metadata.erase("tokenizer.ggml.scores");
  expect(h, "no tokenizer.ggml.scores");

  h = llama_header();
  h.metadata["tokenizer.ggml.scores"] = strings_value(std::vector<std::string>(9, "x"));
  expect(h, "tokenizer.ggml.scores");

  h = llama_header();
  std::vector<float> nan_scores(9, 0.0f);
  nan_scores[4] = std::numeric_limits<float>::quiet_NaN();
  h.metadata["tokenizer.ggml.scores"] = scalars_value(GgufType::kF32, nan_scores);
  expect(h, "score of token 4 is NaN");

  h = llama_header();
  h.metadata["tokenizer.ggml.token_type"] = scalars_value(GgufType::kI32, std::vector<int32_t>{1});
  expect(h, "1 token types for 9 tokens");

  h = llama_header();
  std::vector<int32_t> types(9, 1);
  types[5] = 9;
  h.metadata["tokenizer.ggml.token_type"] = scalars_value(GgufType::kI32, types);
  expect(h, "token 5 has token type 9");
  types[5] = -1;
  h.metadata["tokenizer.ggml.token_type"] = scalars_value(GgufType::kI32, types);
  expect(h, "token 5 has token type -1");

  h = llama_header();
  h.metadata["tokenizer.ggml.bos_token_id"] = u32_value(1000);
  expect(h, "tokenizer.ggml.bos_token_id 1000 is outside the vocabulary");

  h = llama_header();
  h.metadata["tokenizer.ggml.tokens"].strings[4] = "\xFF\xFE";
  expect(h, "token 4 is not valid UTF-8");

  h = llama_header();
  h.metadata["tokenizer.ggml.pre"] = string_value("llama-bpe");
  expect(h, "byte-level pre-tokenizer");

  h = llama_header();
  h.metadata["tokenizer.ggml.merges"] = strings_value({"a b"});
  expect(h, "tokenizer.ggml.merges is not supported");

  h = llama_header();
  h.metadata["tokenizer.ggml.add_bos_token"] = u32_value(7);
  expect(h, "tokenizer.ggml.add_bos_token");
}

TEST(GgufSpm, GemmaNeedsNoScoresAndRespellsSpaceTokens) {
  GgufHeader h = llama_header();
  h.metadata["general.architecture"] = string_value("gemma3");
  h.metadata.erase("tokenizer.ggml.scores");
  h.metadata["tokenizer.ggml.tokens"].strings[3] = "  ";  // becomes "▁▁"
  Json config;
  tok::TokenizerJson parsed = tok::gguf_spm_tokenizer(h, "test.gguf", config);
  bool respelled = false;
  for (const auto& [token, id] : parsed.bpe.vocab) respelled |= token == "\xE2\x96\x81\xE2\x96\x81";
  EXPECT_TRUE(respelled);
  EXPECT_EQ(parsed.doc["model"]["unk_token"], "<unk>");
}

TEST(GgufSpm, DuplicateTokensKeepTheLastId) {
  GgufHeader h = llama_header();
  h.metadata["tokenizer.ggml.tokens"].strings[8] = "a";  // "b" -> a second "a"
  Json config;
  tok::TokenizerJson parsed = tok::gguf_spm_tokenizer(h, "test.gguf", config);
  for (const auto& [token, id] : parsed.bpe.vocab) {
    if (token == "a") {
      EXPECT_EQ(id, 8);
    }
  }
  EXPECT_EQ(parsed.bpe.vocab.size(), 8u);
}

// A small in-process stand-in for tests/fuzz/gguf_tokenizer_fuzz.cc (which needs clang): every
// truncation and many random byte changes of a fixture load or fail with specd::Error.
TEST(GgufSpm, MutatedFixturesFailCleanly) {
  const std::string text =
      read_text_file(std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/spm_llama_edge.gguf");
  const std::vector<uint8_t> original(text.begin(), text.end());
  auto run = [](const std::vector<uint8_t>& bytes) {
    try {
      GgufHeader h = parse_gguf(bytes.data(), bytes.size(), "mutated.gguf");
      Json config;
      tok::TokenizerJson parsed = tok::gguf_spm_tokenizer(h, "mutated.gguf", config);
      auto impl = tok::build_tokenizer(std::move(parsed), std::move(config), "");
      std::vector<int32_t> ids;
      impl->encode_segment("Hello world  \xE4\xB8\xAD <s>", true, ids);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  ASSERT_TRUE(run(original));
  for (size_t n = 0; n < original.size(); n += 7) {
    run(std::vector<uint8_t>(original.begin(), original.begin() + static_cast<long>(n)));
  }
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int loaded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bytes = original;
    for (int k = 0; k < 1 + static_cast<int>(next() % 3); ++k) {
      bytes[next() % bytes.size()] = static_cast<uint8_t>(next());
    }
    loaded += run(bytes);
  }
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace specd
