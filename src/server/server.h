// The OpenAI-compatible HTTP server: routes, authentication, streaming, draining.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/batch_engine.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace specd::server {

struct ApiRequest;

// Sets an OpenAI error object as the response body.
void send_error(httplib::Response& response, int status, const std::string& message,
                const std::string& param = "", const std::string& code = "");

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (see bind())
  std::string api_key;           // empty: no authentication
  std::string model_id;          // the name clients pass as "model"
  std::string drafter = "none";  // reported in /v1/models and the stats
  size_t max_body_bytes = 4u << 20;
  int http_threads = 64;  // connections served at once (streams hold one each)
  int read_timeout_seconds = 10;
  int max_tokens_default = 0;  // 0: up to the end of the context
};

// What a request needs from the loaded model.
struct ServerModel {
  BatchEngine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // nullptr: chat completions are refused
  ChatRenderOptions render_defaults;
  std::vector<int> stop_tokens;  // end-of-sequence ids
  int context = 0;               // KV entries per sequence
  SamplingParams default_sampling;
};

class Server {
 public:
  Server(ServerOptions options, ServerModel model);
  ~Server();

  // Binds the listening socket; returns the port (useful with port 0). Throws specd::Error.
  int bind();
  // Serves until stop(); returns false if the server could not run.
  bool listen();
  // New completion requests get 503 from now on; in-flight ones continue.
  void begin_drain();
  void stop();
  void set_ready(bool ready) { ready_.store(ready); }
  bool draining() const { return draining_.load(); }
  int in_flight() const { return in_flight_.load(); }
  Metrics& metrics() { return metrics_; }

 private:
  void routes();
  bool authorized(const httplib::Request& request) const;
  void handle_completion(const httplib::Request& request, httplib::Response& response, bool chat);
  std::vector<int32_t> prompt_ids(const ApiRequest& api);

  ServerOptions options_;
  ServerModel model_;
  std::unique_ptr<httplib::Server> http_;
  Metrics metrics_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> next_id_{1};
  std::mutex template_mutex_;
};

}  // namespace specd::server
