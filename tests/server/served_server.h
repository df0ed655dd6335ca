// The HTTP server in-process on 127.0.0.1 over the pycoder fixture models (n-gram + draft-model
// speculation, 4 slots, an API key), and a test fixture with raw-socket request helpers.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "engine/batch_engine.h"
#include "engine/sequence_drafter.h"
#include "http_test_client.h"
#include "io/mapped_file.h"
#include "io/tensor_store.h"
#include "server/server.h"

namespace specd::testing_support {

inline const std::string kRoot = SPECD_SOURCE_DIR;
inline constexpr int kContext = 512;
inline const std::string kKey = "sk-test-0123456789";
inline const std::string kAuth = "Authorization: Bearer " + kKey + "\r\n";

struct Served {
  ModelConfig config, draft_config;
  TensorStore store, draft_store;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model, draft;
  std::unique_ptr<KvCache> kv, draft_kv;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  std::unique_ptr<BatchDraftModel> draft_model;
  std::unique_ptr<PrefixCache> prefix_cache;
  std::unique_ptr<BatchEngine> engine;
  std::unique_ptr<server::Server> http;
  std::thread listener;
  int port = 0;

  Served() {
    const std::string dir = kRoot + "/models/pycoder-target";
    config = load_model_config(dir);
    store = TensorStore::open_dir(dir);
    backend = make_backend(Device{}, 2);
    model = std::make_unique<Transformer>(*backend, config, store,
                                          TransformerLimits{64, kSmallBatch, kContext});
    kv = std::make_unique<KvCache>(
        *backend, KvCacheShape{config.n_layers, config.n_kv_heads, config.head_dim, 4, kContext,
                               DType::kBF16});
    const std::string draft_dir = kRoot + "/models/pycoder-draft";
    draft_config = load_model_config(draft_dir);
    draft_store = TensorStore::open_dir(draft_dir);
    draft = std::make_unique<Transformer>(*backend, draft_config, draft_store,
                                          TransformerLimits{64, kSmallBatch, kContext + 16});
    tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(dir));
    chat_template = std::make_unique<ChatTemplate>(
        read_text_file(kRoot + "/tests/data/server/chat_template.jinja"));
    // As `serve --spec ngram+draft`: n-gram per sequence, draft-model proposals batched.
    draft_kv = std::make_unique<KvCache>(
        *backend, KvCacheShape{draft_config.n_layers, draft_config.n_kv_heads,
                               draft_config.head_dim, 4, kContext + 16, DType::kBF16});
    draft_model = std::make_unique<BatchDraftModel>(*draft, *draft_kv, config.vocab_size, 0.0);
    SequenceDrafterOptions drafting;
    drafting.mode = "ngram";
    BatchEngineOptions options;
    options.parallel = 4;
    options.draft_model = draft_model.get();
    prefix_cache = std::make_unique<PrefixCache>(*backend, *kv, 64, size_t(16) << 20);
    options.prefix_cache = prefix_cache.get();
    engine = std::make_unique<BatchEngine>(*model, *kv, options,
                                           [drafting] { return make_sequence_drafter(drafting); });
    server::ServerOptions http_options;
    http_options.host = "127.0.0.1";
    http_options.port = 0;
    http_options.api_key = kKey;
    http_options.model_id = "pycoder";
    http_options.drafter = "ngram+draft";
    http_options.max_body_bytes = 1 << 20;
    http_options.read_timeout_seconds = 1;
    http_options.http_threads = 32;
    http_options.max_tokens_default = 16;  // mutated requests that lose max_tokens stay short
    server::ServerModel served;
    served.engine = engine.get();
    served.tokenizer = tokenizer.get();
    served.chat_template = chat_template.get();
    served.stop_tokens = {0};
    served.context = kContext;
    served.default_sampling.temperature = 1.0;
    http = std::make_unique<server::Server>(http_options, served);
    port = http->bind();
    engine->start();
    http->set_ready(true);
    listener = std::thread([this] { http->listen(); });
  }
  ~Served() {
    http->stop();
    listener.join();
    engine->stop();
  }
};

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { served_ = new Served(); }
  static void TearDownTestSuite() {
    delete served_;
    served_ = nullptr;
  }
  // Sends raw bytes and returns the whole response (bounded by `timeout_ms`).
  static std::string exchange(const std::string& raw, int timeout_ms = 30000,
                              const std::string& stop_at = "") {
    RawConnection c(served_->port);
    EXPECT_TRUE(c.ok());
    c.send_all(raw);
    return c.read(timeout_ms, stop_at);
  }
  static std::pair<int, Json> post(const std::string& path, const Json& body,
                                   const std::string& headers = kAuth) {
    std::string response = exchange(http_request("POST", path, body.dump(), headers));
    Json parsed = Json::parse(dechunk(response), nullptr, false);
    return {status_of(response), parsed};
  }
  static void expect_error(const std::string& response, int status, const std::string& what) {
    EXPECT_EQ(status_of(response), status) << what << "\n" << response.substr(0, 400);
    Json body = Json::parse(body_of(response), nullptr, false);
    ASSERT_FALSE(body.is_discarded()) << what << ": " << response.substr(0, 400);
    ASSERT_TRUE(body.contains("error")) << what;
    EXPECT_TRUE(body["error"]["message"].is_string()) << what;
    EXPECT_TRUE(body["error"]["type"].is_string()) << what;
  }
  static Json completion(int max_tokens, const Json& extra = Json::object()) {
    Json body = {{"model", "pycoder"},
                 {"prompt", "def fibonacci(n):\n"},
                 {"max_tokens", max_tokens},
                 {"temperature", 0}};
    for (const auto& [k, v] : extra.items()) body[k] = v;
    return body;
  }
  // Waits (bounded) until the engine has no active or queued sequence.
  static bool wait_idle(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      BatchEngineSnapshot s = served_->engine->snapshot();
      if (s.active == 0 && s.waiting == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // data: payloads of an SSE body, in order.
  static std::vector<std::string> sse_events(const std::string& body) {
    std::vector<std::string> out;
    size_t p = 0;
    while ((p = body.find("data: ", p)) != std::string::npos) {
      size_t end = body.find("\n\n", p);
      if (end == std::string::npos) break;
      out.push_back(body.substr(p + 6, end - p - 6));
      p = end + 2;
    }
    return out;
  }
  inline static Served* served_ = nullptr;
};

}  // namespace specd::testing_support
