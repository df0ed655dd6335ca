// OpenAI-style API errors: an HTTP status and {"error": {message, type, param, code}}.
#pragma once

#include <stdexcept>
#include <string>

#include "chat/chat_template.h"

namespace specd::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string param_, code_;
};

// The error body OpenAI's API returns for `status`.
inline OrderedJson error_body(int status, const std::string& message, const std::string& param = "",
                              const std::string& code = "") {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? (status == 503 ? "service_unavailable" : "server_error")
                                     : "invalid_request_error";
  OrderedJson error = {{"message", message},
                       {"type", type},
                       {"param", param.empty() ? OrderedJson(nullptr) : OrderedJson(param)},
                       {"code", code.empty() ? OrderedJson(nullptr) : OrderedJson(code)}};
  return {{"error", error}};
}

// Serialises JSON for the wire; invalid UTF-8 (e.g. a lone byte-level token) becomes U+FFFD.
inline std::string to_wire(const OrderedJson& value) {
  return value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace specd::server
