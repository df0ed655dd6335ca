// The HTTP server in-process on 127.0.0.1: endpoints, OpenAI error objects for every kind of bad
// input, streaming that equals the whole response, stop strings cut exactly, API keys, client
// disconnects that free their slot, slow partial requests, and a bounded storm of mutated and
// hostile requests after which a normal request still succeeds.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "served_server.h"

namespace specd {
namespace {

using testing_support::body_of;
using testing_support::dechunk;
using testing_support::http_request;
using testing_support::kAuth;
using testing_support::kKey;
using testing_support::RawConnection;
using testing_support::ServerTest;
using testing_support::status_of;

TEST_F(ServerTest, HealthModelsAndMetrics) {
  std::string health = exchange(http_request("GET", "/health", "", "", ""));
  EXPECT_EQ(status_of(health), 200);
  EXPECT_EQ(Json::parse(body_of(health))["status"], "ok");
  std::string models = exchange(http_request("GET", "/v1/models", "", kAuth, ""));
  ASSERT_EQ(status_of(models), 200);
  Json list = Json::parse(body_of(models));
  EXPECT_EQ(list["data"][0]["id"], "pycoder");
  expect_error(exchange(http_request("GET", "/v1/models/other", "", kAuth, "")), 404, "model");
  auto [status, body] = post("/v1/completions", completion(4));
  ASSERT_EQ(status, 200) << body.dump();
  std::string metrics = exchange(http_request("GET", "/metrics", "", kAuth, ""));
  ASSERT_EQ(status_of(metrics), 200);
  for (const char* name :
       {"specd_requests_total{endpoint=\"completions\",status=\"200\"}",
        "specd_generated_tokens_total", "specd_queue_depth", "specd_active_sequences",
        "specd_kv_cache_usage_ratio", "specd_time_to_first_token_seconds_bucket",
        "specd_time_per_output_token_seconds_count", "specd_acceptance_length"}) {
    EXPECT_NE(metrics.find(name), std::string::npos) << name;
  }
}

TEST_F(ServerTest, ApiKeyIsRequired) {
  expect_error(exchange(http_request("POST", "/v1/completions", completion(2).dump(), "")), 401,
               "no key");
  expect_error(exchange(http_request("POST", "/v1/completions", completion(2).dump(),
                                     "Authorization: Bearer sk-test-0123456788\r\n")),
               401, "wrong key");
  expect_error(exchange(http_request("POST", "/v1/completions", completion(2).dump(),
                                     "Authorization: Bearer " + kKey + "x\r\n")),
               401, "longer key");
  expect_error(exchange(http_request("GET", "/v1/models", "", "", "")), 401, "models");
}

TEST_F(ServerTest, CompletionUsageStatsAndStreamingAgree) {
  auto [status, whole] = post("/v1/completions", completion(32));
  ASSERT_EQ(status, 200) << whole.dump();
  EXPECT_EQ(whole["object"], "text_completion");
  const std::string text = whole["choices"][0]["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(
      whole["usage"]["completion_tokens"].get<int>() + whole["usage"]["prompt_tokens"].get<int>(),
      whole["usage"]["total_tokens"].get<int>());
  EXPECT_TRUE(whole["specd"].contains("acceptance_length"));
  EXPECT_EQ(whole["specd"]["drafter"], "ngram+draft");

  Json stream_body =
      completion(32, {{"stream", true}, {"stream_options", {{"include_usage", true}}}});
  std::string raw = exchange(http_request("POST", "/v1/completions", stream_body.dump(), kAuth));
  ASSERT_EQ(status_of(raw), 200);
  EXPECT_NE(raw.find("text/event-stream"), std::string::npos);
  std::vector<std::string> events = sse_events(dechunk(raw));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string streamed, finish;
  Json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk = Json::parse(events[i], nullptr, false);
    ASSERT_FALSE(chunk.is_discarded()) << events[i];
    if (chunk.contains("usage")) usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    streamed += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(finish, whole["choices"][0]["finish_reason"].get<std::string>());
  EXPECT_EQ(usage, whole["usage"]);

  // Chat through the fixture template, with logprobs.
  Json chat = {{"model", "pycoder"},
               {"messages",
                {{{"role", "system"}, {"content", "be short"}},
                 {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "add"}}}}}}},
               {"max_completion_tokens", 8},
               {"temperature", 0},
               {"logprobs", true},
               {"top_logprobs", 3}};
  auto [chat_status, reply] = post("/v1/chat/completions", chat);
  ASSERT_EQ(chat_status, 200) << reply.dump();
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");
  const Json& content = reply["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), reply["usage"]["completion_tokens"].get<size_t>());
  for (const Json& entry : content) {
    EXPECT_LE(entry["logprob"].get<double>(), 0.0);
    ASSERT_EQ(entry["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_NEAR(entry["logprob"].get<double>(), entry["top_logprobs"][0]["logprob"].get<double>(),
                1e-6);
  }
}

TEST_F(ServerTest, PrefixCacheHitGivesTheSameText) {
  std::string prompt;
  for (int i = 0; i < 40; ++i)
    prompt += "value_" + std::to_string(i) + " = compute(" + std::to_string(i) + ")\n";
  Json body = completion(16, {{"prompt", prompt}});
  auto [s1, first] = post("/v1/completions", body);
  auto [s2, second] = post("/v1/completions", body);
  ASSERT_EQ(s1, 200);
  ASSERT_EQ(s2, 200);
  EXPECT_GT(first["usage"]["prompt_tokens"].get<int>(), 200);
  EXPECT_GE(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 192);
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);
}

TEST_F(ServerTest, StopStringsCutExactly) {
  auto [status, whole] = post("/v1/completions", completion(48, {{"ignore_eos", true}}));
  ASSERT_EQ(status, 200);
  const std::string text = whole["choices"][0]["text"];
  ASSERT_GT(text.size(), 40u);
  int checked = 0;
  for (size_t start : {3ul, 11ul, 17ul, 25ul, 33ul}) {
    for (size_t len : {1ul, 4ul, 9ul}) {
      if (start + len > text.size()) continue;
      std::string stop = text.substr(start, len);
      size_t first = text.find(stop);
      for (bool stream : {false, true}) {
        Json body = completion(
            48, {{"ignore_eos", true}, {"stop", {"\x01never", stop}}, {"stream", stream}});
        std::string raw = exchange(http_request("POST", "/v1/completions", body.dump(), kAuth));
        ASSERT_EQ(status_of(raw), 200);
        std::string got, finish;
        if (stream) {
          for (const std::string& e : sse_events(dechunk(raw))) {
            if (e == "[DONE]") break;
            Json chunk = Json::parse(e);
            got += chunk["choices"][0]["text"].get<std::string>();
            if (!chunk["choices"][0]["finish_reason"].is_null())
              finish = chunk["choices"][0]["finish_reason"];
          }
        } else {
          Json reply = Json::parse(body_of(raw));
          got = reply["choices"][0]["text"];
          finish = reply["choices"][0]["finish_reason"];
        }
        EXPECT_EQ(got, text.substr(0, first)) << "stop '" << stop << "' stream " << stream;
        EXPECT_EQ(finish, "stop");
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 20);
}

TEST_F(ServerTest, BadRequestsGetOpenAiErrors) {
  const std::string url = "/v1/completions";
  auto send = [&](const std::string& body, const std::string& type = "application/json") {
    return exchange(http_request("POST", url, body, kAuth, type));
  };
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": "), 400, "truncated JSON");
  expect_error(send("[1, 2, 3]"), 400, "not an object");
  expect_error(send(""), 400, "empty body");
  expect_error(send(std::string(200000, '[') + std::string(200000, ']')), 400, "deep nesting");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"\xff\xfe\"}"), 400, "invalid UTF-8");
  expect_error(send(completion(2).dump(), "text/plain"), 415, "content type");
  expect_error(send("{\"prompt\": \"x\"}"), 400, "no model");
  expect_error(send("{\"model\": 7, \"prompt\": \"x\"}"), 400, "model type");
  expect_error(send("{\"model\": \"gpt-4\", \"prompt\": \"x\"}"), 404, "unknown model");
  expect_error(send("{\"model\": \"pycoder\"}"), 400, "no prompt");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": {}}"), 400, "prompt type");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": [1, -2]}"), 400, "negative id");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": [1, 99999999]}"), 400, "id past vocab");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"max_tokens\": \"4\"}"), 400,
               "max_tokens type");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"max_tokens\": 1e999}"), 400,
               "huge number");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"max_tokens\": "
                    "123456789012345678901234567890}"),
               400, "huge integer");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"max_tokens\": 0}"), 400,
               "zero max_tokens");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"max_tokens\": 100000}"), 400,
               "past the context");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"temperature\": 3}"), 400,
               "temperature range");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"temperature\": true}"), 400,
               "temperature type");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"n\": 2}"), 400, "n = 2");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"stop\": 5}"), 400, "stop type");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"stream\": \"yes\"}"), 400,
               "stream type");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"seed\": 1.5}"), 400,
               "seed type");
  expect_error(send("{\"model\": \"pycoder\", \"prompt\": \"x\", \"logprobs\": 9}"), 400,
               "logprobs range");
  std::string long_prompt;
  for (int i = 0; i < 2000; ++i) long_prompt += "x = 1\n";
  std::string too_long = send(Json{{"model", "pycoder"}, {"prompt", long_prompt}}.dump());
  expect_error(too_long, 400, "prompt past the context");
  EXPECT_NE(too_long.find("context_length_exceeded"), std::string::npos);
  expect_error(send(std::string(2 << 20, ' ')), 413, "body over the limit");

  auto chat = [&](const std::string& body) {
    return exchange(http_request("POST", "/v1/chat/completions", body, kAuth));
  };
  expect_error(chat("{\"model\": \"pycoder\"}"), 400, "no messages");
  expect_error(chat("{\"model\": \"pycoder\", \"messages\": []}"), 400, "empty messages");
  expect_error(chat("{\"model\": \"pycoder\", \"messages\": [{\"role\": \"wizard\", "
                    "\"content\": \"x\"}]}"),
               400, "bad role");
  expect_error(chat("{\"model\": \"pycoder\", \"messages\": [{\"role\": \"user\", "
                    "\"content\": 5}]}"),
               400, "content type");
  expect_error(chat("{\"model\": \"pycoder\", \"messages\": [{\"role\": \"user\", \"content\": "
                    "[{\"type\": \"image_url\"}]}]}"),
               400, "image part");
  expect_error(chat("{\"model\": \"pycoder\", \"messages\": [{\"role\": \"user\", \"content\": "
                    "\"x\"}], \"top_logprobs\": 2}"),
               400, "top_logprobs without logprobs");
  expect_error(exchange(http_request("GET", "/v1/nothing", "", kAuth, "")), 404, "no route");
  // Unknown fields are ignored, as OpenAI does.
  auto [status, reply] = post(url, completion(2, {{"unknown_field", {{"a", 1}}}, {"user", "u"}}));
  EXPECT_EQ(status, 200) << reply.dump();
}

TEST_F(ServerTest, DisconnectCancelsAndSlowClientsTimeOut) {
  // A stream whose client goes away after the first event: its sequence is cancelled.
  for (int i = 0; i < 3; ++i) {
    RawConnection c(served_->port);
    ASSERT_TRUE(c.ok());
    Json body = completion(400, {{"stream", true}, {"ignore_eos", true}});
    c.send_all(http_request("POST", "/v1/completions", body.dump(), kAuth));
    std::string first = c.read(20000, "data: ");
    EXPECT_NE(first.find("data: "), std::string::npos);
    c.close();
  }
  EXPECT_TRUE(wait_idle(20000)) << "cancelled streams must free their slots";
  // Partial requests (headers or body never finished) are dropped after the read timeout.
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(std::make_unique<RawConnection>(served_->port));
    std::string r = http_request("POST", "/v1/completions", completion(2).dump(), kAuth);
    slow.back()->send_all(r.substr(0, i % 2 ? 40 : r.size() - 10));
  }
  auto [status, reply] = post("/v1/completions", completion(2));
  EXPECT_EQ(status, 200) << "a normal request while slow clients hang";
  for (auto& c : slow) {
    std::string answer = c->read(5000);  // closed (maybe with a 400/408) within the timeout
    EXPECT_TRUE(answer.empty() || status_of(answer) >= 400) << answer.substr(0, 200);
  }
}

TEST_F(ServerTest, HostileRequestStormLeavesServerHealthy) {
  const std::vector<std::string> seeds = {
      completion(2).dump(),
      completion(3, {{"stream", true}, {"stop", {"\n"}}}).dump(),
      Json{{"model", "pycoder"},
           {"messages", {{{"role", "user"}, {"content", "hi"}}}},
           {"max_tokens", 2}}
          .dump(),
  };
  const std::vector<std::string> junk = {
      "GARBAGE\r\n\r\n",
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\n" + std::string(100000, 'X') + ": y\r\n\r\n"};
  std::mt19937 rng(12345);
  const int kCount = 1500;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  int answered = 0, dropped = 0, sent = 0;
  for (int i = 0; i < kCount && std::chrono::steady_clock::now() < deadline; ++i, ++sent) {
    std::string raw;
    if (i % 25 == 0) {
      raw = junk[(i / 25) % junk.size()];
    } else {
      std::string body = seeds[rng() % seeds.size()];
      const int edits = 1 + rng() % 4;
      for (int e = 0; e < edits && !body.empty(); ++e) {
        size_t at = rng() % body.size();
        switch (rng() % 5) {
          case 0:
            body[at] = static_cast<char>(rng() % 256);
            break;  // any byte
          case 1:
            body.erase(at, 1 + rng() % 8);
            break;  // deletion
          case 2:
            body.insert(at, std::string(1 + rng() % 3, "{[\"]},:0e-\\"[rng() % 11]));
            break;
          case 3:
            body.resize(at);
            break;  // truncation
          case 4:
            body.insert(at, "1e308");
            break;  // huge numbers
        }
      }
      raw = http_request("POST", i % 3 == 2 ? "/v1/chat/completions" : "/v1/completions", body,
                         kAuth);
    }
    // Junk may leave the connection open (keep-alive or an unfinished request): read briefly.
    // (an error body ends with "}}").
    std::string response = i % 25 == 0 ? exchange(raw, 3000, "}}") : exchange(raw, 10000);
    const int status = status_of(response);
    if (status == 0) {
      ++dropped;
      continue;
    }
    ++answered;
    EXPECT_TRUE(status == 200 || status == 400 || status == 404 || status == 413 || status == 415 ||
                status == 431 || status == 414 || status == 501)
        << "request " << i << " got " << response.substr(0, 300);
    if (status >= 400 && status != 431 && status != 414 && status != 501) {
      Json body = Json::parse(body_of(response), nullptr, false);
      EXPECT_TRUE(!body.is_discarded() && body.contains("error")) << response.substr(0, 300);
    }
  }
  std::printf("storm: %d requests sent, %d answered, %d dropped\n", sent, answered, dropped);
  EXPECT_GE(sent, 200) << "the storm made too little progress";
  EXPECT_GT(answered, dropped);
  EXPECT_TRUE(wait_idle(20000));
  auto [status, reply] = post("/v1/completions", completion(4));
  EXPECT_EQ(status, 200) << reply.dump();
  std::string health = exchange(http_request("GET", "/health", "", "", ""));
  EXPECT_EQ(status_of(health), 200);
}

}  // namespace
}  // namespace specd
