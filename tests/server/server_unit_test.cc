// Request validation and stop-string matching, without a model or a socket.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/request.h"
#include "server/text_stream.h"

namespace specd::server {
namespace {

const std::string kRoot = SPECD_SOURCE_DIR;

int status_of(const std::string& body, bool chat) {
  try {
    parse_request(body, chat);
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

TEST(ServerRequest, ParsesOpenAiFields) {
  ApiRequest r = parse_request(
      R"({"model": "m", "prompt": ["hello"], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
          "top_k": 40, "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": 0.5,
          "frequency_penalty": -0.5, "seed": -3, "stop": ["a", "b"], "stream": true,
          "stream_options": {"include_usage": true}, "n": 1, "logprobs": 2, "user": "u",
          "unknown": [1, {"x": null}]})",
      false);
  EXPECT_EQ(r.prompt_text, "hello");
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 0.5);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.seed, static_cast<uint64_t>(-3));
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.top_logprobs, 2);

  ApiRequest c = parse_request(
      R"({"model": "m", "messages": [{"role": "developer", "content": "s"},
          {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]},
          {"role": "tool", "content": "r", "tool_call_id": "1"}],
          "max_completion_tokens": 3, "logprobs": true, "top_logprobs": 4})",
      true);
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[0]["role"], "system");
  EXPECT_EQ(c.messages[1]["content"], "ab");
  EXPECT_TRUE(c.messages[2]["content"].is_null());
  EXPECT_EQ(*c.max_tokens, 3);
  EXPECT_EQ(c.top_logprobs, 4);
  ApiRequest ids = parse_request(R"({"model": "m", "prompt": [1, 2, 3]})", false);
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
}

TEST(ServerRequest, RejectsWrongTypesAndRanges) {
  for (const char* body :
       {"", "nul", "{", "[]", "{\"model\": \"m\"}", "{\"model\": null, \"prompt\": \"x\"}",
        R"({"model": "m", "prompt": "x", "max_tokens": 1.5})",
        R"({"model": "m", "prompt": "x", "max_tokens": -1})",
        R"({"model": "m", "prompt": "x", "max_tokens": 18446744073709551615})",
        R"({"model": "m", "prompt": "x", "top_p": 0})",
        R"({"model": "m", "prompt": "x", "top_k": "4"})",
        R"({"model": "m", "prompt": "x", "stop": [1]})",
        R"({"model": "m", "prompt": "x", "stream_options": 1})",
        R"({"model": "m", "prompt": "x", "n": 0})",
        R"({"model": "m", "prompt": "x", "logprobs": true})",
        R"({"model": "m", "prompt": "x", "echo": true})", R"({"model": "m", "prompt": ["a", "b"]})",
        R"({"model": "m", "prompt": []})"}) {
    EXPECT_EQ(status_of(body, false), 400) << body;
  }
  EXPECT_EQ(status_of(std::string(100, '[') + std::string(100, ']'), false), 400);
  EXPECT_EQ(json_depth("{\"a\": \"[[[[\"}", 64), 1);
  EXPECT_EQ(json_depth("[[[\"\\\"[\"]]]", 64), 3);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": [{"role": "user"}]})", true), 400);
  EXPECT_EQ(status_of(R"({"model": "m", "messages": "hi"})", true), 400);
  EXPECT_EQ(
      status_of(R"({"model": "m", "messages": [{"role": "user", "content": "x", "name": 1}]})",
                true),
      400);
}

// Feeds token ids of `text` one at a time and returns what the stream releases.
std::string run(const Tokenizer& tokenizer, const std::string& text,
                const std::vector<std::string>& stops, bool* stopped) {
  TextStream stream(tokenizer, stops);
  std::string out;
  for (int32_t id : tokenizer.encode(text, false)) out += stream.push(id);
  out += stream.finish();
  *stopped = stream.stopped();
  return out;
}

TEST(ServerTextStream, CutsAtTheEarliestStopAcrossTokens) {
  Tokenizer tokenizer = Tokenizer::load(kRoot + "/models/pycoder-target");
  const std::string text = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))  # déjà vu\n";
  bool stopped = false;
  EXPECT_EQ(run(tokenizer, text, {}, &stopped), text);
  EXPECT_FALSE(stopped);
  // Every substring as a stop string: the output is the text before its first occurrence.
  int cases = 0;
  for (size_t start = 0; start < text.size(); start += 3) {
    for (size_t len : {1, 2, 5, 11}) {
      if (start + len > text.size()) continue;
      std::string stop = text.substr(start, len);
      std::string got = run(tokenizer, text, {"zzz-no", stop}, &stopped);
      EXPECT_EQ(got, text.substr(0, text.find(stop))) << "stop '" << stop << "'";
      EXPECT_TRUE(stopped);
      ++cases;
    }
  }
  EXPECT_GT(cases, 50);
  // A stop string that only starts to match is released at the end.
  EXPECT_EQ(run(tokenizer, "x = 1\n", {"\nyy"}, &stopped), "x = 1\n");
  EXPECT_FALSE(stopped);
}

TEST(ServerTextStream, ReleasesOnlyCompleteUtf8) {
  Tokenizer tokenizer = Tokenizer::load(kRoot + "/models/pycoder-target");
  TextStream stream(tokenizer, {});
  for (int32_t id : tokenizer.encode("é😀ü", false)) {
    std::string piece = stream.push(id);
    // Each released piece is valid UTF-8 on its own.
    EXPECT_EQ(Json(piece).dump(-1, ' ', false, Json::error_handler_t::strict).size() > 0, true);
  }
}

}  // namespace
}  // namespace specd::server
