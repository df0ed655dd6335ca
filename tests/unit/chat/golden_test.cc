// Golden chat renders: every conversation of tests/data/chat/<family>.json, rendered by
// transformers' apply_chat_template (tools/chat/make_golden.py), must come out byte-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"
#include "unit/chat/chat_test_util.h"

namespace specd {
namespace {

// The template families covered, each with at least 30 successful goldens.
const char* const kRequired[] = {"qwen3",       "qwen2_5",      "llama3", "llama3_1",
                                 "llama3_2",    "mistral_nemo", "gemma3", "deepseek_r1",
                                 "deepseek_v3", "phi4"};

std::vector<std::string> families() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(chat_test::data_dir())) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".json" && file != "interpreter_cases.json") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

class GoldenFamily : public testing::TestWithParam<std::string> {};

TEST_P(GoldenFamily, RendersLikeTransformers) {
  const OrderedJson golden = chat_test::load(GetParam() + ".json");
  const ChatTemplate tmpl(golden.at("template").get<std::string>());
  ChatRenderOptions base;
  if (golden.at("bos_token").is_string()) base.bos_token = golden.at("bos_token");
  if (golden.at("eos_token").is_string()) base.eos_token = golden.at("eos_token");
  base.now = golden.at("now").get<std::string>();
  int rendered = 0, index = 0;
  for (const OrderedJson& c : golden.at("cases")) {
    const std::string label = GetParam() + " case " + std::to_string(index++);
    ChatRenderOptions options = base;
    options.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
    options.tools = c.at("tools");
    options.extra_kwargs = c.at("kwargs");
    std::string actual;
    std::string error;
    try {
      actual = tmpl.render(c.at("messages"), options);
    } catch (const Error& e) {
      error = e.what();
    }
    if (c.contains("expected")) {
      ASSERT_EQ(error, "") << label;
      const std::string expected = c.at("expected").get<std::string>();
      EXPECT_EQ(actual, expected) << label << ": " << chat_test::first_difference(expected, actual);
      rendered += actual == expected;
    } else {
      EXPECT_NE(error, "") << label << ": expected an error: " << c.at("error").at("message");
      if (!error.empty()) chat_test::expect_error_matches(c.at("error"), error, label);
    }
  }
  if (std::find(std::begin(kRequired), std::end(kRequired), GetParam()) != std::end(kRequired)) {
    EXPECT_GE(rendered, 30) << GetParam() << ": fewer than 30 identical renders";
  }
}

INSTANTIATE_TEST_SUITE_P(Chat, GoldenFamily, testing::ValuesIn(families()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(GoldenFiles, EveryRequiredFamilyIsPresent) {
  const std::vector<std::string> present = families();
  for (const char* family : kRequired) {
    EXPECT_NE(std::find(present.begin(), present.end(), family), present.end()) << family;
  }
}

}  // namespace
}  // namespace specd
