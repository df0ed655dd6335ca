// A raw-socket HTTP/1.1 client for tests: sends exact bytes to 127.0.0.1 and reads the reply,
// so tests can send what a well-behaved client never would. Every call is bounded in time.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace specd::testing_support {

class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() { close(); }
  bool ok() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send_all(const std::string& data) {
    size_t sent = 0;
    while (fd_ >= 0 && sent < data.size()) {
      ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return sent == data.size();
  }
  // Reads until the peer closes, `stop_at` appears, or `timeout_ms` passes.
  std::string read(int timeout_ms, const std::string& stop_at = "") {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    char buffer[65536];
    while (fd_ >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
      ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
      if (!stop_at.empty() && out.find(stop_at) != std::string::npos) break;
    }
    return out;
  }

 private:
  int fd_ = -1;
};

// The status code of a raw HTTP response ("HTTP/1.1 200 OK ..."), or 0.
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.substr(9, 3).c_str());
}

// The body after the header block (chunked bodies are returned raw).
inline std::string body_of(const std::string& response) {
  size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

// The body with chunked transfer encoding undone (unchanged when not chunked).
inline std::string dechunk(const std::string& response) {
  std::string body = body_of(response);
  if (response.find("Transfer-Encoding: chunked") == std::string::npos) return body;
  std::string out;
  size_t p = 0;
  while (p < body.size()) {
    size_t eol = body.find("\r\n", p);
    if (eol == std::string::npos) break;
    size_t n = std::strtoul(body.substr(p, eol - p).c_str(), nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    p = eol + 2 + n + 2;
  }
  return out;
}

inline std::string http_request(const std::string& method, const std::string& path,
                                const std::string& body, const std::string& extra_headers = "",
                                const std::string& type = "application/json") {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!type.empty()) r += "Content-Type: " + type + "\r\n";
  r += extra_headers;
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return r;
}

}  // namespace specd::testing_support
