// Interpreter cases (tests/data/chat/interpreter_cases.json): one construct each, with outputs and
// errors produced by jinja2 in transformers' chat-template environment.
#include "chat/interpreter.h"

#include <gtest/gtest.h>

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/lexer.h"
#include "chat/objects.h"
#include "chat/parser.h"
#include "core/error.h"
#include "unit/chat/chat_test_util.h"

namespace specd {
namespace {

const OrderedJson& cases() {
  static const OrderedJson* doc = new OrderedJson(chat_test::load("interpreter_cases.json"));
  return *doc;
}

std::vector<size_t> case_indices() {
  std::vector<size_t> indices(cases().at("cases").size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  return indices;
}

class InterpreterCase : public testing::TestWithParam<size_t> {};

TEST_P(InterpreterCase, MatchesJinja2) {
  const OrderedJson& c = cases().at("cases").at(GetParam());
  const std::string name = c.at("name").get<std::string>();
  const std::string source = c.at("template").get<std::string>();
  const std::string now = cases().at("now").get<std::string>();
  SCOPED_TRACE("template: " + OrderedJson(source).dump());
  if (c.contains("expected")) {
    std::string actual;
    try {
      actual = ChatTemplate(source).render_variables(c.at("variables"), now);
    } catch (const Error& error) {
      FAIL() << name << ": unexpected error: " << error.what();
    }
    const std::string expected = c.at("expected").get<std::string>();
    EXPECT_EQ(actual, expected) << name << ": " << chat_test::first_difference(expected, actual);
    return;
  }
  try {
    const std::string actual = ChatTemplate(source).render_variables(c.at("variables"), now);
    FAIL() << name << ": expected an error (" << c.at("error").at("message") << "), got "
           << OrderedJson(actual).dump();
  } catch (const Error& error) {
    chat_test::expect_error_matches(c.at("error"), error.what(), name);
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, InterpreterCase, testing::ValuesIn(case_indices()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return cases().at("cases").at(info.param).at("name").get<std::string>();
                         });

std::string render(const std::string& source,
                   const OrderedJson& variables = OrderedJson::object()) {
  return ChatTemplate(source).render_variables(variables);
}

std::string error_of(const std::string& source) {
  try {
    render(source);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ChatLimits, DeepNestingFailsCleanly) {
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "(";
  EXPECT_NE(error_of("{{ " + deep + "1" + std::string(5000, ')') + " }}"), "");
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if true %}";
  EXPECT_NE(error_of(blocks), "");
  EXPECT_NE(error_of("{{ " + std::string(5000, '-') + "1 }}"), "");
  EXPECT_NE(error_of("{{ x" + std::string(5000, '|') + " }}"), "");
}

// Renders with small limits through the interpreter itself, so that the checks stay fast.
std::string limited_error_of(const std::string& source) {
  chat::RenderLimits limits;
  limits.max_steps = 20000;
  limits.max_output_bytes = 100000;
  limits.max_call_depth = 50;
  const chat::Body body = chat::parse_template(chat::tokenize_template(source));
  auto scope = std::make_shared<chat::Scope>(nullptr);
  chat::add_globals(scope.get());
  try {
    chat::Interpreter(limits, std::tm{}).render(body, scope);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ChatLimits, RunawayRecursionAndOutputFail) {
  EXPECT_NE(error_of("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 1000000000 }}").find("exceeds"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] * 1000000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
  EXPECT_NE(limited_error_of("{% set a = 'x' * 60000 %}{{ a ~ a }}").find("exceeds"),
            std::string::npos);
  EXPECT_NE(limited_error_of("{% set a = 'x' * 60000 %}{{ a }}{{ a }}").find("exceeds"),
            std::string::npos);
  EXPECT_NE(limited_error_of("{% set ns = namespace(s='xx') %}"
                             "{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("exceeds"),
            std::string::npos);
  EXPECT_NE(limited_error_of("{% for i in range(100000) %}{% for j in range(100000) %}"
                             "{% endfor %}{% endfor %}")
                .find("steps"),
            std::string::npos);
  EXPECT_NE(limited_error_of("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_EQ(limited_error_of("{% for i in range(100) %}{{ i }}{% endfor %}"), "");
}

TEST(ChatErrors, NameTheTemplateLine) {
  EXPECT_EQ(error_of("a\nb\n{% if %}").rfind("chat template line 3:", 0), 0u);
  EXPECT_EQ(error_of("a\n{{ raise_exception('boom') }}"),
            "chat template line 2: template raised an error: boom");
  EXPECT_EQ(error_of("{% for x in 5 %}{% endfor %}").rfind("chat template line 1:", 0), 0u);
  EXPECT_NE(error_of("{% extends 'base.html' %}").find("unsupported tag 'extends'"),
            std::string::npos);
}

TEST(ChatErrors, InvalidUtf8TemplateIsRejected) { EXPECT_THROW(ChatTemplate("\xc3\x28"), Error); }

TEST(ChatApi, KeyOrderOfToolsIsKeptWithOrderedJson) {
  const ChatTemplate tmpl("{{ tools[0] | tojson }}");
  ChatRenderOptions options;
  options.tools = OrderedJson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  const OrderedJson messages = OrderedJson::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(tmpl.render(messages, options), R"({"type": "function", "function": {"name": "f"}})");
  options.tools = Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(tmpl.render(Json(messages), options),
            R"({"function": {"name": "f"}, "type": "function"})");  // Json sorts its keys
}

TEST(ChatApi, MessagePreprocessingMatchesTransformers) {
  const ChatTemplate tmpl(
      "{% for m in messages %}{{ m|tojson }}|{% endfor %}{{ add_generation_prompt }}"
      "{{ tools }}{{ documents }}{{ bos_token }}{{ eos_token is defined }}{{ enable_thinking }}");
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.extra_kwargs = OrderedJson{{"enable_thinking", false}};
  const OrderedJson messages = OrderedJson::parse(
      R"([{"role": "user", "content": "q", "name": null},
          {"role": "assistant", "content": "a", "reasoning": "r"}])");
  EXPECT_EQ(tmpl.render(messages, options),
            R"({"role": "user", "content": "q"}|)"
            R"({"thinking": "r", "role": "assistant", "content": "a", "reasoning": "r", )"
            R"("reasoning_content": "r"}|TrueNoneNone<s>FalseFalse)");
  EXPECT_THROW(tmpl.render(OrderedJson::array(), options), Error);
  EXPECT_THROW(tmpl.render(OrderedJson::parse(R"(["not an object"])"), options), Error);
}

TEST(ChatApi, FixedDateForStrftimeNow) {
  const ChatTemplate tmpl("{{ strftime_now('%d %b %Y, %A %H:%M') }}");
  ChatRenderOptions options;
  options.now = "2024-02-29 13:05";
  EXPECT_EQ(tmpl.render(OrderedJson::parse(R"([{"role": "user", "content": ""}])"), options),
            "29 Feb 2024, Thursday 13:05");
  options.now = "2024-13-01";
  EXPECT_THROW(tmpl.render(OrderedJson::parse(R"([{"role": "user", "content": ""}])"), options),
               Error);
}

}  // namespace
}  // namespace specd
