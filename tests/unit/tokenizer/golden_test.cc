// Exact-match tests against goldens from Hugging Face `tokenizers`
// (tools/tokenizer/make_golden.py): encode with and without special tokens, decode, decode skipping
// special tokens, streaming.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/utf8.h"
#include "unit/tokenizer/golden_helpers.h"

namespace specd {
namespace {

std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  out << "]";
  return out.str();
}

// Streams `ids` one by one; checks that every piece is valid UTF-8; returns the concatenation.
std::string stream_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip,
                          bool& pieces_valid) {
  StreamingDetokenizer stream(tokenizer, skip);
  std::string text;
  for (int32_t id : ids) {
    std::string piece = stream.push(id);
    pieces_valid &= tok::is_valid_utf8(piece);
    text += piece;
  }
  text += stream.flush();
  return text;
}

struct Tally {
  int checked = 0;
  int failed = 0;
  std::vector<std::string> examples;
  void check(bool ok, const std::string& what) {
    ++checked;
    if (ok) return;
    ++failed;
    if (examples.size() < 6) examples.push_back(what);
  }
};

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, MatchesReference) {
  const Json golden = read_json_file(test::golden_path(GetParam()));
  std::string missing;
  std::optional<Tokenizer> loaded = test::golden_tokenizer(golden, missing);
  if (!loaded) {
    GTEST_SKIP() << "tokenizer files not found at " << missing << "; run "
                 << (golden.contains("gguf_fetched") ? "tools/gguf/fetch_models.sh gemma3"
                                                     : "tools/tokenizer/fetch_tokenizers.sh")
                 << " (SPECD_DATA_DIR selects the cache)";
  }
  const Tokenizer& tokenizer = *loaded;
  if (golden.contains("bos_id")) {
    const Json& bos = golden["bos_id"];
    EXPECT_EQ(tokenizer.bos_id(), bos.is_null() ? std::nullopt : std::optional(bos.get<int32_t>()));
    const Json& eos = golden["eos_id"];
    EXPECT_EQ(tokenizer.eos_id(), eos.is_null() ? std::nullopt : std::optional(eos.get<int32_t>()));
  }
  const auto prefix = golden["special_prefix"].get<std::vector<int32_t>>();
  const auto suffix = golden["special_suffix"].get<std::vector<int32_t>>();

  Tally encode, encode_special, decode, decode_skip, stream, stream_skip, roundtrip;
  bool pieces_valid = true;
  for (const Json& c : golden["cases"]) {
    const bool is_bytes = c.contains("bytes");
    const std::string text =
        is_bytes ? test::hex_to_bytes(c["bytes"].get<std::string>()) : c["text"].get<std::string>();
    const std::string label =
        (is_bytes ? "bytes " + c["bytes"].get<std::string>() : c["text"].dump());
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> want_special = prefix;
    want_special.insert(want_special.end(), ids.begin(), ids.end());
    want_special.insert(want_special.end(), suffix.begin(), suffix.end());
    if (c.contains("ids_special")) want_special = c["ids_special"].get<std::vector<int32_t>>();
    // Invalid UTF-8 inputs are compared with the reference fed the U+FFFD-repaired text.
    const std::string reference_text = is_bytes ? tok::to_valid_utf8(text) : text;
    const std::string decoded =
        c.contains("decoded") ? c["decoded"].get<std::string>() : reference_text;
    const std::string decoded_skip =
        c.contains("decoded_skip") ? c["decoded_skip"].get<std::string>() : decoded;

    std::vector<int32_t> got = tokenizer.encode(text, false);
    encode.check(got == ids, label + " -> " + show(got) + ", want " + show(ids));
    got = tokenizer.encode(text, true);
    encode_special.check(got == want_special,
                         label + " -> " + show(got) + ", want " + show(want_special));
    std::string text_out = tokenizer.decode(ids);
    decode.check(text_out == decoded,
                 show(ids) + " -> " + Json(text_out).dump() + ", want " + Json(decoded).dump());
    text_out = tokenizer.decode(ids, true);
    decode_skip.check(text_out == decoded_skip, show(ids) + " -> " + Json(text_out).dump());
    text_out = stream_decode(tokenizer, ids, false, pieces_valid);
    stream.check(text_out == decoded, show(ids) + " streams " + Json(text_out).dump());
    text_out = stream_decode(tokenizer, ids, true, pieces_valid);
    stream_skip.check(text_out == decoded_skip, show(ids) + " streams " + Json(text_out).dump());
    if (c["roundtrip"].get<bool>()) {
      roundtrip.check(tokenizer.decode(tokenizer.encode(text, false)) == reference_text, label);
    }
  }
  for (const Json& c : golden["decode_cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::string want = c["text"].get<std::string>();
    const std::string want_skip = c["text_skip"].get<std::string>();
    std::string text_out = tokenizer.decode(ids);
    decode.check(text_out == want,
                 show(ids) + " -> " + Json(text_out).dump() + ", want " + Json(want).dump());
    text_out = tokenizer.decode(ids, true);
    decode_skip.check(text_out == want_skip, show(ids) + " -> " + Json(text_out).dump() +
                                                 ", want " + Json(want_skip).dump());
    text_out = stream_decode(tokenizer, ids, false, pieces_valid);
    stream.check(text_out == want, show(ids) + " streams " + Json(text_out).dump());
    text_out = stream_decode(tokenizer, ids, true, pieces_valid);
    stream_skip.check(text_out == want_skip, show(ids) + " streams " + Json(text_out).dump());
  }

  auto report = [&](const char* what, const Tally& t) {
    std::cout << "[ golden   ] " << GetParam() << " " << what << ": " << (t.checked - t.failed)
              << "/" << t.checked << " exact\n";
    for (const std::string& example : t.examples) ADD_FAILURE() << what << ": " << example;
    EXPECT_EQ(t.failed, 0) << what;
  };
  report("encode", encode);
  report("encode+special", encode_special);
  report("decode", decode);
  report("decode(skip_special)", decode_skip);
  report("stream", stream);
  report("stream(skip_special)", stream_skip);
  report("roundtrip", roundtrip);
  EXPECT_TRUE(pieces_valid) << "a streamed piece was not valid UTF-8";
}

#if defined(SPECD_GOLDEN_GGUF_FETCHED)
// GGUF files fetched by tools/gguf/fetch_models.sh (label slow).
INSTANTIATE_TEST_SUITE_P(All, TokenizerGolden, ::testing::Values("gguf_gemma3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
#elif defined(SPECD_GOLDEN_GGUF)
// Tiny GGUF files of the source tree against transformers' GGUF conversion.
INSTANTIATE_TEST_SUITE_P(All, TokenizerGolden,
                         ::testing::Values("gguf_spm_llama", "gguf_spm_llama_edge", "gguf_spm_phi3",
                                           "gguf_spm_gemma"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
#else
INSTANTIATE_TEST_SUITE_P(
    All, TokenizerGolden,
    ::testing::Values("qwen3", "llama3", "llama2", "gemma3", "qwen3_gpt2_regex",
                      "llama3_normalized", "llama2_metaspace_first", "llama2_metaspace_split",
                      "gemma3_whitespace", "synthetic_subword", "synthetic_fallback"),
    [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
#endif

}  // namespace
}  // namespace specd
