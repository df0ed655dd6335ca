// Hostile and malformed templates: random fragment soups and mutated real templates must either
// render or fail with specd::Error, never crash or throw anything else (run under ASan/UBSan).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"
#include "unit/chat/chat_test_util.h"

namespace specd {
namespace {

// Renders `source`; returns false (with a test failure) if anything but specd::Error escapes.
bool render_or_error(const std::string& source, const OrderedJson& messages,
                     const ChatRenderOptions& options) {
  try {
    ChatTemplate(source).render(messages, options);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-specd exception " << e.what() << " for template "
                  << OrderedJson(source).dump(-1, ' ', false,
                                              OrderedJson::error_handler_t::replace);
    return false;
  }
  return true;
}

const OrderedJson& conversation() {
  static const OrderedJson* messages = new OrderedJson(OrderedJson::parse(R"([
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "hi é"},
    {"role": "assistant", "content": "", "reasoning_content": "r",
     "tool_calls": [{"id": "abcdefghi", "type": "function",
                     "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
    {"role": "tool", "content": "out", "tool_call_id": "abcdefghi"},
    {"role": "user", "content": "bye"}])"));
  return *messages;
}

TEST(ChatRobustness, RandomFragmentSoups) {
  static const char* const kFragments[] = {"{{",
                                           "}}",
                                           "{%",
                                           "%}",
                                           "{#",
                                           "#}",
                                           "{%-",
                                           "-%}",
                                           "{{-",
                                           "-}}",
                                           " if ",
                                           " for ",
                                           " in ",
                                           " endif ",
                                           " endfor ",
                                           " else ",
                                           " elif ",
                                           " set ",
                                           " macro ",
                                           " endmacro ",
                                           " call ",
                                           " endcall ",
                                           " filter ",
                                           " endfilter ",
                                           " raw ",
                                           " endraw ",
                                           "x",
                                           "messages",
                                           "loop",
                                           "loop.index",
                                           "ns",
                                           "namespace(a=1)",
                                           "ns.a",
                                           "range(3)",
                                           "range(-5, 5, 2)",
                                           "|",
                                           "tojson",
                                           "trim",
                                           "length",
                                           "join(',')",
                                           "map(attribute='role')",
                                           "selectattr('role')",
                                           "list",
                                           "(",
                                           ")",
                                           "[",
                                           "]",
                                           "{",
                                           "}",
                                           "'a'",
                                           "\"b\\n\"",
                                           "1",
                                           "0",
                                           "-1",
                                           "2.5",
                                           "1e308",
                                           "-",
                                           "+",
                                           "*",
                                           "/",
                                           "//",
                                           "%",
                                           "**",
                                           "~",
                                           "=",
                                           "==",
                                           "!=",
                                           "<",
                                           ",",
                                           ".",
                                           ":",
                                           "::-1",
                                           "is",
                                           " defined",
                                           " none",
                                           " not ",
                                           " and ",
                                           " or ",
                                           "\n",
                                           " ",
                                           "  ",
                                           "\t",
                                           "messages[0]",
                                           "m()",
                                           "raise_exception('e')",
                                           "strftime_now('%Y')",
                                           "'%s' % 1",
                                           "caller()",
                                           "tools",
                                           "é",
                                           "😀"};
  std::mt19937 rng(12345);
  std::uniform_int_distribution<size_t> pick(0, std::size(kFragments) - 1);
  std::uniform_int_distribution<int> length(1, 40);
  ChatRenderOptions options;
  options.now = "2025-01-01";
  for (int i = 0; i < 3000; ++i) {
    std::string source;
    for (int n = length(rng); n > 0; --n) source += kFragments[pick(rng)];
    if (!render_or_error(source, conversation(), options)) break;
  }
}

TEST(ChatRobustness, MutatedRealTemplates) {
  std::mt19937 rng(678);
  ChatRenderOptions options;
  options.now = "2025-01-01";
  options.bos_token = "<s>";
  options.tools = OrderedJson::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  static const char kAlphabet[] = "{}%#-+()[]'\"|.:,=~ \nxa0";
  for (const char* family :
       {"qwen3", "llama3_1", "mistral_nemo", "gemma3", "deepseek_v3", "gpt_oss", "qwen3_coder"}) {
    const std::string original =
        chat_test::load(std::string(family) + ".json").at("template").get<std::string>();
    EXPECT_TRUE(render_or_error(original, conversation(), options)) << family;
    std::uniform_int_distribution<size_t> where(0, original.size() - 1);
    std::uniform_int_distribution<size_t> what(0, sizeof(kAlphabet) - 2);
    for (int i = 0; i < 150; ++i) {
      std::string mutated = original;
      for (int edits = 1 + i % 3; edits > 0; --edits) {
        const size_t at = where(rng) % mutated.size();
        switch (i % 3) {
          case 0:
            mutated.erase(at, 1);
            break;
          case 1:
            mutated.insert(at, 1, kAlphabet[what(rng)]);
            break;
          default:
            mutated[at] = kAlphabet[what(rng)];
        }
      }
      if (!render_or_error(mutated, conversation(), options)) break;
    }
  }
}

}  // namespace
}  // namespace specd
