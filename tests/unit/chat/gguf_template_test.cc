// Chat templates for GGUF files without one (Gemma 3): a clear error naming --chat-template, and
// a template file rendered with the special tokens of the GGUF file exactly as transformers
// renders it for its own GGUF tokenizer.
#include <gtest/gtest.h>

#include <string>

#include "chat/chat_template.h"
#include "core/error.h"
#include "unit/chat/chat_test_util.h"

namespace specd {
namespace {

std::string gemma_gguf() {
  return std::string(SPECD_SOURCE_DIR) + "/tests/data/gguf/spm_gemma.gguf";
}

TEST(GgufChatTemplate, MissingTemplateNamesTheOption) {
  try {
    load_chat_template(gemma_gguf(), nullptr);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("has no chat template"), std::string::npos) << what;
    EXPECT_NE(what.find("--chat-template FILE"), std::string::npos) << what;
  }
}

// tests/data/chat/gemma3.json holds transformers' renders of the published Gemma 3 template;
// transformers renders the same conversations identically with the tokenizer it builds from
// tests/data/gguf/spm_gemma.gguf (checked when that file was made), so the special tokens taken
// from the GGUF metadata must reproduce every one.
TEST(GgufChatTemplate, TemplateFileWithGgufSpecialTokens) {
  const OrderedJson golden = chat_test::load("gemma3.json");
  ChatRenderOptions base;
  const ChatTemplate tmpl = load_chat_template(gemma_gguf(), &base, false,
                                               chat_test::data_dir() + "/templates/gemma3.jinja");
  EXPECT_EQ(base.bos_token, "<bos>");
  EXPECT_EQ(base.eos_token, "<eos>");
  EXPECT_EQ(base.extra_kwargs.at("unk_token"), "<unk>");
  EXPECT_EQ(base.extra_kwargs.at("pad_token"), "<pad>");
  base.now = golden.at("now").get<std::string>();
  int rendered = 0, index = 0;
  for (const OrderedJson& c : golden.at("cases")) {
    if (!c.contains("expected")) continue;
    const std::string label = "gemma3 case " + std::to_string(index++);
    ChatRenderOptions options = base;
    options.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    options.tools = c.at("tools");
    for (const auto& [key, value] : c.at("kwargs").items()) options.extra_kwargs[key] = value;
    const std::string expected = c.at("expected").get<std::string>();
    const std::string actual = tmpl.render(c.at("messages"), options);
    EXPECT_EQ(actual, expected) << label << ": " << chat_test::first_difference(expected, actual);
    rendered += actual == expected;
  }
  EXPECT_GE(rendered, 30);
}

}  // namespace
}  // namespace specd
