// load_chat_template: finding a model directory's template and special tokens as transformers does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "chat/chat_template.h"
#include "core/error.h"

namespace specd {
namespace {

class ModelDir : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("specd_chat_loader_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
  }
  std::string render(const ChatTemplate& tmpl, const ChatRenderOptions& options) {
    return tmpl.render(OrderedJson::parse(R"([{"role": "user", "content": "hi"}])"), options);
  }
  std::filesystem::path dir_;
};

TEST_F(ModelDir, StringTemplateAndAddedTokenObjects) {
  write("tokenizer_config.json", R"({
    "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ pad_token }}",
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>", "pad_token": "<pad>", "unk_token": null})");
  ChatRenderOptions options;
  const ChatTemplate tmpl = load_chat_template(dir_.string(), &options);
  EXPECT_EQ(options.bos_token, "<s>");
  EXPECT_EQ(options.eos_token, "</s>");
  EXPECT_EQ(render(tmpl, options), "<s>hi</s><pad>");
}

TEST_F(ModelDir, NamedTemplatesPickDefaultOrToolUse) {
  write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  EXPECT_EQ(render(load_chat_template(dir_.string(), nullptr), {}), "D");
  EXPECT_EQ(render(load_chat_template(dir_.string(), nullptr, true), {}), "T");
}

TEST_F(ModelDir, JinjaFileWinsOverConfig) {
  write("tokenizer_config.json", R"({"chat_template": "config", "eos_token": "E"})");
  write("chat_template.jinja", "file {{ eos_token }}\n");
  ChatRenderOptions options;
  EXPECT_EQ(render(load_chat_template(dir_.string(), &options), options), "file E");
}

TEST_F(ModelDir, SpecialTokensMapFallback) {
  write("tokenizer_config.json", R"({"chat_template": "{{ bos_token }}"})");
  write("special_tokens_map.json", R"({"bos_token": {"content": "<B>"}})");
  ChatRenderOptions options;
  EXPECT_EQ(render(load_chat_template(dir_.string(), &options), options), "<B>");
}

TEST_F(ModelDir, MissingTemplateIsAClearError) {
  write("tokenizer_config.json", R"({"eos_token": "E"})");
  try {
    load_chat_template(dir_.string(), nullptr);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("has no chat template"), std::string::npos);
  }
  write("tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  EXPECT_THROW(load_chat_template(dir_.string(), nullptr), Error);
}

}  // namespace
}  // namespace specd
