// Public API behaviour on small hand-made tokenizer.json files: loading and its errors,
// vocabulary accessors, tokenizer_config.json handling, invalid UTF-8, streaming, threads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace specd {
namespace {

// A byte-level BPE over the 256 byte characters (ids 0..255) plus a few merges and added tokens.
Json tiny_byte_level() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(tok::byte_to_utf8(static_cast<uint8_t>(b)))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab["\xC4\xA0w"] = 260;  // "Ġw"
  return Json{
      {"version", "1.0"},
      {"added_tokens", Json::array({Json{{"id", 261},
                                         {"content", "<|end|>"},
                                         {"special", true},
                                         {"normalized", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"single_word", false}},
                                    Json{{"id", 262},
                                         {"content", "<bos>"},
                                         {"special", true},
                                         {"normalized", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"single_word", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges",
         Json::array({"h e", "l l", "he ll", Json::array({"hell", "o"}), "\xC4\xA0 w"})}}}};
}

Tokenizer tiny(Json config = Json::object()) {
  return Tokenizer::from_json_text(tiny_byte_level().dump(), std::move(config));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("specd_tok_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(TokenizerApi, EncodesWithMergesAndAddedTokens) {
  Tokenizer t = tiny();
  EXPECT_EQ(t.encode("hello"), (std::vector<int32_t>{259}));
  EXPECT_EQ(t.encode("hello w<|end|>"), (std::vector<int32_t>{259, 260, 261}));
  EXPECT_EQ(t.decode(t.encode("hello w<|end|>")), "hello w<|end|>");
  std::vector<int32_t> ids{259, 261};
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "hello");
  EXPECT_EQ(t.vocab_size(), 263);
  EXPECT_EQ(t.token_id("hello"), 259);
  EXPECT_EQ(t.token_id("<|end|>"), 261);
  EXPECT_FALSE(t.token_id("nope").has_value());
  EXPECT_EQ(t.token_text(260), "\xC4\xA0w");
  EXPECT_EQ(t.token_text(261), "<|end|>");
  EXPECT_TRUE(t.is_special(261));
  EXPECT_FALSE(t.is_special(259));
  EXPECT_NE(error_of([&] { t.token_text(9999); }).find("9999"), std::string::npos);
  // Unknown ids are skipped by decode, as tokenizers does.
  std::vector<int32_t> unknown{259, 100000};
  EXPECT_EQ(t.decode(unknown), "hello");
}

TEST(TokenizerApi, AddBosTokenFromConfigAsTransformersDoes) {
  Json config = {
      {"bos_token", "<bos>"}, {"eos_token", {{"content", "<|end|>"}}}, {"add_bos_token", true}};
  Tokenizer t = tiny(config);
  EXPECT_EQ(t.bos_id(), 262);
  EXPECT_EQ(t.eos_id(), 261);
  EXPECT_EQ(t.encode("hello"), (std::vector<int32_t>{262, 259}));
  EXPECT_EQ(t.encode("hello", false), (std::vector<int32_t>{259}));
  config["add_eos_token"] = true;
  EXPECT_EQ(tiny(config).encode("hello"), (std::vector<int32_t>{262, 259, 261}));
  EXPECT_EQ(tiny().encode("hello"), (std::vector<int32_t>{259}));
}

TEST(TokenizerApi, InvalidUtf8IsRepairedBeforeEncoding) {
  Tokenizer t = tiny();
  const std::string bad =
      "he\xff"
      "llo\xe4\xb8";
  EXPECT_EQ(t.encode(bad), t.encode("he\xEF\xBF\xBDllo\xEF\xBF\xBD"));
  EXPECT_EQ(t.decode(t.encode(bad)), "he\xEF\xBF\xBDllo\xEF\xBF\xBD");
}

TEST(TokenizerApi, StreamingHoldsIncompleteCharacters) {
  Tokenizer t = tiny();
  // "€" is E2 82 AC: three byte tokens; nothing is emitted until the character is complete.
  std::vector<int32_t> euro = t.encode("\xe2\x82\xac");
  ASSERT_EQ(euro.size(), 3u);
  StreamingDetokenizer stream(t);
  EXPECT_EQ(stream.push(259), "hello");
  EXPECT_EQ(stream.push(euro[0]), "");
  EXPECT_EQ(stream.push(euro[1]), "");
  EXPECT_EQ(stream.push(euro[2]), "\xe2\x82\xac");
  EXPECT_EQ(stream.push(euro[0]), "");
  EXPECT_EQ(stream.push(261), "\xEF\xBF\xBD<|end|>");  // a broken character ends as U+FFFD
  EXPECT_EQ(stream.push(euro[0]), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(259), "hello");  // flush starts a new stream
  EXPECT_EQ(stream.flush(), "");
}

TEST(TokenizerApi, LoadsDirectoryWithConfigAndTemplates) {
  TempDir dir;
  dir.write("tokenizer.json", tiny_byte_level().dump());
  Tokenizer bare = Tokenizer::load(dir.path());
  EXPECT_TRUE(bare.config().is_object());
  EXPECT_TRUE(bare.config().empty());
  EXPECT_EQ(bare.chat_template(), "");
  EXPECT_FALSE(bare.bos_id().has_value());

  Json config = {{"chat_template", Json::array({Json{{"name", "tool_use"}, {"template", "T"}},
                                                Json{{"name", "default"}, {"template", "D"}}})},
                 {"eos_token", "<|end|>"}};
  dir.write("tokenizer_config.json", config.dump());
  Tokenizer with_config = Tokenizer::load(dir.path());
  EXPECT_EQ(with_config.chat_template(), "D");
  EXPECT_EQ(with_config.eos_id(), 261);
  EXPECT_EQ(with_config.config()["eos_token"], "<|end|>");
  dir.write("chat_template.jinja", "{{ messages }}");
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_template(), "{{ messages }}");
}

TEST(TokenizerApi, ClearErrors) {
  TempDir dir;
  EXPECT_NE(error_of([&] { Tokenizer::load(dir.path()); }).find("no tokenizer.json"),
            std::string::npos);
  dir.write("tokenizer.json", "{\"model\": ");
  EXPECT_NE(error_of([&] { Tokenizer::load(dir.path()); }).find("invalid JSON"), std::string::npos);

  Json doc = tiny_byte_level();
  doc["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("WordPiece"),
            std::string::npos);
  doc["model"]["type"] = "Unigram";
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("not supported"),
            std::string::npos);

  doc = tiny_byte_level();
  doc["model"]["merges"].push_back("zz qq");
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("zz"), std::string::npos);
  doc = tiny_byte_level();
  doc["model"]["merges"].push_back("a b c");
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("one space"),
            std::string::npos);
  doc = tiny_byte_level();
  doc["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("Precompiled"),
            std::string::npos);
  doc = tiny_byte_level();
  doc["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("regex"),
            std::string::npos);
  doc = tiny_byte_level();
  doc["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of([&] { Tokenizer::from_json_text(doc.dump()); }).find("decoder"),
            std::string::npos);
}

TEST(TokenizerApi, ConcurrentEncodesAgree) {
  Tokenizer t = tiny();
  const std::string text = "hello world, hello again\n\thello <|end|> héllo 中文";
  const std::vector<int32_t> want = t.encode(text);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < 200; ++r) mismatches[i] += t.encode(text) != want;
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace specd
