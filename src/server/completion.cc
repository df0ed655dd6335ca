// POST /v1/chat/completions and /v1/completions: validate, queue on the engine, then answer
// with one JSON body or an SSE stream of complete-UTF-8 chunks.
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <random>

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "server/api_error.h"
#include "server/client_connection.h"
#include "server/request.h"
#include "server/responses.h"
#include "server/server.h"
#include "server/text_stream.h"

namespace specd::server {

namespace {

// What the engine thread hands to the HTTP thread of one request.
struct Channel {
  std::mutex mutex;
  std::condition_variable ready;
  std::string text;                    // released text not yet sent
  std::vector<TokenLogprob> logprobs;  // entries not yet sent
  bool done = false;
  GenerationResult result;  // valid when done (tokens are not kept)
};

// How often a non-streamed request checks that its client is still connected.
constexpr auto kClientCheckInterval = std::chrono::milliseconds(100);
// The status recorded for a request whose client went away before its answer ("client closed
// request", as nginx logs it); the client never sees it.
constexpr int kClientClosedStatus = 499;

// Frees the request's engine slot because its client went away (logged once).
void cancel_for_disconnect(BatchRequest& request, const std::string& id) {
  if (!request.cancelled.exchange(true)) {
    SPECD_LOG_INFO("{}: the client disconnected; generation cancelled", id);
  }
}

std::string finish_reason_of(const std::string& engine_reason) {
  return engine_reason == "length" ? "length" : "stop";
}

// Counts requests in flight for draining.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>& counter) : counter_(counter) { counter_.fetch_add(1); }
  ~InFlight() { counter_.fetch_sub(1); }

 private:
  std::atomic<int>& counter_;
};

}  // namespace

std::vector<int32_t> Server::prompt_ids(const ApiRequest& api) {
  const Tokenizer& tokenizer = *model_.tokenizer;
  if (!api.chat) {
    if (api.prompt_is_ids) return api.prompt_ids;
    return tokenizer.encode(api.prompt_text, true);
  }
  if (!model_.chat_template) {
    throw ApiError(400,
                   "this model has no chat template; use /v1/completions or start the "
                   "server with --chat-template FILE");
  }
  ChatRenderOptions options = model_.render_defaults;
  options.tools = api.tools;
  std::string text;
  try {
    std::lock_guard<std::mutex> lock(template_mutex_);
    text = model_.chat_template->render(api.messages, options);
  } catch (const Error& e) {
    throw ApiError(400, std::string("the chat template rejected the messages: ") + e.what(),
                   "messages");
  }
  return tokenizer.encode(text, false);  // the template writes the special tokens itself
}

void Server::handle_completion(const httplib::Request& http_request, httplib::Response& response,
                               bool chat) {
  InFlight in_flight(in_flight_);
  const double received = now_seconds();
  std::shared_ptr<BatchRequest> request;
  std::shared_ptr<Channel> channel;
  ApiRequest api;
  try {
    if (!authorized(http_request)) {
      throw ApiError(401, "invalid API key (send 'Authorization: Bearer KEY')", "",
                     "invalid_api_key");
    }
    if (!ready_.load()) throw ApiError(503, "the model is loading");
    if (draining_.load()) throw ApiError(503, "the server is shutting down");
    const std::string type = http_request.get_header_value("Content-Type");
    if (type.rfind("application/json", 0) != 0) {
      throw ApiError(415, "Content-Type must be application/json");
    }
    api = parse_request(http_request.body, chat, model_.default_sampling);
    if (api.model != options_.model_id) {
      throw ApiError(404,
                     "the model '" + api.model + "' does not exist (this server serves '" +
                         options_.model_id + "')",
                     "model", "model_not_found");
    }
    std::vector<int32_t> prompt = prompt_ids(api);
    const int n_prompt = static_cast<int>(prompt.size());
    if (n_prompt == 0) throw ApiError(400, "the prompt is empty", chat ? "messages" : "prompt");
    if (n_prompt >= model_.context) {
      throw ApiError(400,
                     fmt::format("the prompt has {} tokens; this server's context is {} tokens",
                                 n_prompt, model_.context),
                     chat ? "messages" : "prompt", "context_length_exceeded");
    }
    int max_tokens = model_.context - n_prompt;
    if (options_.max_tokens_default > 0)
      max_tokens = std::min(max_tokens, options_.max_tokens_default);
    if (api.max_tokens) {
      if (n_prompt + static_cast<int64_t>(*api.max_tokens) > model_.context) {
        throw ApiError(400,
                       fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceed the "
                                   "context of {} tokens",
                                   n_prompt, *api.max_tokens, model_.context),
                       "max_tokens", "context_length_exceeded");
      }
      max_tokens = *api.max_tokens;
    }
    request = std::make_shared<BatchRequest>();
    GenerateRequest& g = request->generate;
    g.prompt = std::move(prompt);
    g.max_tokens = max_tokens;
    g.sampling = api.sampling;
    if (!api.seed_given)
      g.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + next_id_;
    if (!api.ignore_eos) g.stop_tokens = model_.stop_tokens;
    request->top_logprobs = api.top_logprobs;
    channel = std::make_shared<Channel>();
    auto text = std::make_shared<TextStream>(*model_.tokenizer, api.stop);
    auto first = std::make_shared<bool>(true);
    Metrics* metrics = &metrics_;
    request->on_token = [channel, text, first, metrics, received](int32_t token,
                                                                  const TokenLogprob* logprob) {
      if (*first) {
        metrics->record_time_to_first_token(now_seconds() - received);
        *first = false;
      }
      std::string piece = text->push(token);
      {
        std::lock_guard<std::mutex> lock(channel->mutex);
        channel->text += piece;
        if (logprob) channel->logprobs.push_back(*logprob);
      }
      channel->ready.notify_all();
      return !text->stopped();
    };
    request->on_done = [channel, text, metrics](const GenerationResult& result) {
      std::string rest = text->finish();
      {
        std::lock_guard<std::mutex> lock(channel->mutex);
        channel->text += rest;
        channel->result.finish_reason = result.finish_reason;
        channel->result.stats = result.stats;
        channel->done = true;
      }
      channel->ready.notify_all();
      metrics->record_generation(result.stats);
    };
    try {
      model_.engine->submit(request);
    } catch (const Error& e) {
      throw ApiError(draining_.load() ? 503 : 400, e.what());
    }
  } catch (const ApiError& e) {
    return send_error(response, e.status(), e.what(), e.param(), e.code());
  } catch (const Error& e) {
    return send_error(response, 400, e.what());
  }

  ResponseInfo info;
  info.chat = chat;
  info.id = fmt::format("{}-{:016x}", chat ? "chatcmpl" : "cmpl",
                        next_id_.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  info.created = static_cast<int64_t>(std::time(nullptr));
  info.model = options_.model_id;
  info.drafter = options_.drafter;
  const Tokenizer& tokenizer = *model_.tokenizer;

  if (!api.stream) {
    // httplib tells a handler nothing about its connection, so look at the socket while waiting.
    ClientWatch client({http_request.local_addr, http_request.local_port, http_request.remote_addr,
                        http_request.remote_port});
    std::unique_lock<std::mutex> lock(channel->mutex);
    while (!channel->ready.wait_for(lock, kClientCheckInterval, [&] { return channel->done; })) {
      lock.unlock();
      const bool connected = client.connected();
      lock.lock();
      if (!connected && !channel->done) {
        cancel_for_disconnect(*request, info.id);
        return send_error(response, kClientClosedStatus, "the client closed the connection");
      }
    }
    const std::string& reason = channel->result.finish_reason;
    if (reason.rfind("error", 0) == 0) return send_error(response, 500, reason);
    if (reason == "cancelled") return send_error(response, 503, "the request was cancelled");
    size_t offset = 0;
    OrderedJson logprobs = api.top_logprobs >= 0
                               ? logprobs_json(channel->logprobs, tokenizer, chat, offset)
                               : OrderedJson(nullptr);
    response.set_content(to_wire(completion_json(info, channel->text, finish_reason_of(reason),
                                                 logprobs, channel->result.stats)),
                         "application/json");
    return;
  }

  struct StreamState {
    bool first = true;
    bool finished = false;
    size_t offset = 0;
    double last_write = 0;
  };
  auto state = std::make_shared<StreamState>();
  const bool include_usage = api.include_usage;
  const int top_logprobs = api.top_logprobs;
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");
  response.set_chunked_content_provider(
      "text/event-stream",
      [channel, request, state, info, include_usage, top_logprobs, &tokenizer](
          size_t, httplib::DataSink& sink) {
        if (state->finished) return false;
        std::string text;
        std::vector<TokenLogprob> logprobs;
        bool done = false;
        {
          std::unique_lock<std::mutex> lock(channel->mutex);
          channel->ready.wait_for(lock, std::chrono::milliseconds(250), [&] {
            return channel->done || !channel->text.empty() || !channel->logprobs.empty();
          });
          text.swap(channel->text);
          logprobs.swap(channel->logprobs);
          done = channel->done;
        }
        std::string out;
        auto event = [&](const OrderedJson& value) { out += "data: " + to_wire(value) + "\n\n"; };
        if (!text.empty() || !logprobs.empty() || state->first) {
          OrderedJson lp = top_logprobs >= 0 && !logprobs.empty()
                               ? logprobs_json(logprobs, tokenizer, info.chat, state->offset)
                               : OrderedJson(nullptr);
          event(chunk_json(info, text, state->first, "", lp));
          state->first = false;
        }
        if (done) {
          const std::string& reason = channel->result.finish_reason;
          if (reason.rfind("error", 0) == 0) {
            event(error_body(500, reason));
          } else {
            event(chunk_json(info, "", false, finish_reason_of(reason), nullptr));
            if (include_usage) event(usage_chunk_json(info, channel->result.stats));
          }
          out += "data: [DONE]\n\n";
          state->finished = true;
        } else if (out.empty() && now_seconds() - state->last_write > 1.0) {
          out = ": keep-alive\n\n";  // a write notices a client that went away
        }
        if (!out.empty()) {
          state->last_write = now_seconds();
          if (!sink.write(out.data(), out.size())) {
            cancel_for_disconnect(*request, info.id);
            return false;
          }
        }
        if (state->finished) sink.done();
        return true;
      },
      [request, id = info.id](bool success) {
        if (!success) cancel_for_disconnect(*request, id);
      });
}

}  // namespace specd::server
