// Routes, authentication, the simple endpoints and the server's lifecycle.
#include "server/server.h"

#include <httplib.h>

#include <ctime>

#include "core/error.h"
#include "server/api_error.h"

namespace specd::server {

namespace {

// Compares without an early exit, so the time taken does not reveal where the strings differ.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

const char* endpoint_of(const std::string& path) {
  if (path == "/v1/chat/completions") return "chat_completions";
  if (path == "/v1/completions") return "completions";
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) return "models";
  if (path == "/health") return "health";
  if (path == "/metrics") return "metrics";
  return "other";
}

}  // namespace

void send_error(httplib::Response& response, int status, const std::string& message,
                const std::string& param, const std::string& code) {
  response.status = status;
  response.set_content(to_wire(error_body(status, message, param, code)), "application/json");
}

Server::Server(ServerOptions options, ServerModel model)
    : options_(std::move(options)),
      model_(std::move(model)),
      http_(std::make_unique<httplib::Server>()) {
  SPECD_CHECK(model_.engine && model_.tokenizer, "the server needs an engine and a tokenizer");
  const int threads = std::max(4, options_.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.read_timeout_seconds, 0);
  http_->set_write_timeout(options_.read_timeout_seconds, 0);
  http_->set_keep_alive_max_count(1000);
  http_->set_keep_alive_timeout(5);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind the same port silently.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  routes();
}

Server::~Server() { stop(); }

bool Server::authorized(const httplib::Request& request) const {
  if (options_.api_key.empty()) return true;
  const std::string header = request.get_header_value("Authorization");
  return constant_time_equal(header, "Bearer " + options_.api_key);
}

void Server::routes() {
  httplib::Server& h = *http_;
  // Every response passes here: count it by endpoint and status.
  h.set_logger([this](const httplib::Request& request, const httplib::Response& response) {
    metrics_.record_request(endpoint_of(request.path), response.status);
  });
  // Statuses httplib sets itself (413 body too large, 404 no route, 400 bad request line) get
  // an OpenAI error body too.
  h.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    std::string message = response.status == 413 ? "the request body is too large"
                          : response.status == 404
                              ? "no route for " + request.method + " " + request.path
                              : "bad request";
    send_error(response, response.status, message);
  });
  h.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = std::string("internal error: ") + e.what();
        } catch (...) {
        }
        send_error(response, 500, message);
      });
  h.Get("/health", [this](const httplib::Request&, httplib::Response& response) {
    if (!ready_.load()) return send_error(response, 503, "the model is loading");
    if (draining_.load()) return send_error(response, 503, "the server is shutting down");
    response.set_content(R"({"status":"ok"})", "application/json");
  });
  h.Get("/metrics", [this](const httplib::Request& request, httplib::Response& response) {
    if (!authorized(request)) {
      return send_error(response, 401, "invalid API key", "", "invalid_api_key");
    }
    response.set_content(metrics_.render(model_.engine->snapshot()),
                         "text/plain; version=0.0.4; charset=utf-8");
  });
  auto model_object = [this] {
    return OrderedJson{{"id", options_.model_id},
                       {"object", "model"},
                       {"created", 0},
                       {"owned_by", "specd"},
                       {"context_length", model_.context},
                       {"drafter", options_.drafter}};
  };
  h.Get("/v1/models",
        [this, model_object](const httplib::Request& request, httplib::Response& response) {
          if (!authorized(request)) {
            return send_error(response, 401, "invalid API key", "", "invalid_api_key");
          }
          OrderedJson body = {{"object", "list"}, {"data", OrderedJson::array({model_object()})}};
          response.set_content(to_wire(body), "application/json");
        });
  h.Get(R"(/v1/models/(.+))",
        [this, model_object](const httplib::Request& request, httplib::Response& response) {
          if (!authorized(request)) {
            return send_error(response, 401, "invalid API key", "", "invalid_api_key");
          }
          if (request.matches[1] != options_.model_id) {
            return send_error(response, 404,
                              "the model '" + std::string(request.matches[1]) + "' does not exist",
                              "model", "model_not_found");
          }
          response.set_content(to_wire(model_object()), "application/json");
        });
  h.Post("/v1/chat/completions",
         [this](const httplib::Request& request, httplib::Response& response) {
           handle_completion(request, response, true);
         });
  h.Post("/v1/completions", [this](const httplib::Request& request, httplib::Response& response) {
    handle_completion(request, response, false);
  });
}

int Server::bind() {
  int port = options_.port == 0
                 ? http_->bind_to_any_port(options_.host)
                 : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  SPECD_CHECK(port > 0, "cannot listen on {}:{} (in use, or not a local address?)", options_.host,
              options_.port);
  options_.port = port;
  return port;
}

bool Server::listen() { return http_->listen_after_bind(); }

void Server::begin_drain() { draining_.store(true); }

void Server::stop() {
  if (http_) http_->stop();
}

}  // namespace specd::server
