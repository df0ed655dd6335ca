// Clients that hang up: a request's socket is found by its addresses and its hangup seen, and
// non-streamed completions whose clients go while they wait are cancelled at once, their slots
// serve the next request, and each is counted with status 499.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "served_server.h"
#include "server/client_connection.h"

namespace specd {
namespace {

using testing_support::body_of;
using testing_support::http_request;
using testing_support::kAuth;
using testing_support::RawConnection;
using testing_support::ServerTest;

// The addresses of a connected IPv4 socket, as the server side sees them.
server::ConnectionAddress address_of(int fd) {
  sockaddr_in local{}, peer{};
  socklen_t length = sizeof(local);
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
  length = sizeof(peer);
  getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length);
  return {"127.0.0.1", ntohs(local.sin_port), "127.0.0.1", ntohs(peer.sin_port)};
}

// Polls (bounded) until peer_connected(fd) is false.
bool wait_gone(int fd) {
  for (int i = 0; i < 200 && server::peer_connected(fd); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return !server::peer_connected(fd);
}

TEST(ServerClientConnection, FindsTheServedSocketAndSeesItsClientGo) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length), 0);
  int clients[2], served[2];
  for (int i = 0; i < 2; ++i) {
    clients[i] = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(clients[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    served[i] = accept(listener, nullptr, nullptr);
    ASSERT_GE(served[i], 0);
  }
  // The served end, not the client end (its addresses reversed) nor the other connection.
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(server::find_connection_socket(address_of(served[i])), served[i]);
  server::ConnectionAddress unknown = address_of(served[0]);
  unknown.remote_host = "127.0.0.2";
  EXPECT_EQ(server::find_connection_socket(unknown), -1);
  server::ClientWatch unknown_watch(unknown);
  EXPECT_TRUE(unknown_watch.connected()) << "a socket that cannot be found is not a hangup";

  // Waiting bytes (a pipelined request) are left unread and count as connected.
  server::ClientWatch watch(address_of(served[0]));
  EXPECT_TRUE(watch.connected());
  ASSERT_EQ(send(clients[0], "x", 1, 0), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(watch.connected());
  char byte = 0;
  EXPECT_EQ(recv(served[0], &byte, 1, 0), 1);
  EXPECT_EQ(byte, 'x');
  // A closed client and a reset one are gone; the other connection is not.
  close(clients[0]);
  EXPECT_TRUE(wait_gone(served[0]));
  EXPECT_FALSE(watch.connected());
  EXPECT_TRUE(server::peer_connected(served[1]));
  linger reset{1, 0};
  setsockopt(clients[1], SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  close(clients[1]);
  EXPECT_TRUE(wait_gone(served[1]));
  for (int fd : {served[0], served[1], listener}) close(fd);
}

class ServerDisconnectTest : public ServerTest {
 protected:
  // The value of the metric line that starts with `series` (name and labels); 0 when absent.
  static double metric(const std::string& series) {
    const std::string text = body_of(exchange(http_request("GET", "/metrics", "", kAuth, "")));
    const size_t p = text.find("\n" + series + " ");
    return p == std::string::npos ? 0 : std::stod(text.substr(p + series.size() + 2));
  }
  // Waits (bounded) until `series` reaches `value`; returns its last value.
  static double wait_metric(const std::string& series, double value, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    double now = metric(series);
    while (now < value && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      now = metric(series);
    }
    return now;
  }
  // Waits (bounded) until `count` sequences are admitted (prefilling or decoding).
  static bool wait_active(int count, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (served_->engine->snapshot().active < count) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
};

TEST_F(ServerDisconnectTest, NonStreamedRequestsAreCancelledWhenTheirClientsGo) {
  const std::string kCompletions = R"(specd_requests_total{endpoint="completions",status="499"})";
  const std::string kChat = R"(specd_requests_total{endpoint="chat_completions",status="499"})";
  const std::string kGenerated = "specd_generated_tokens_total";
  ASSERT_TRUE(wait_idle(10000));
  const double completions_before = metric(kCompletions), chat_before = metric(kChat);
  const double generated_before = metric(kGenerated);

  // Long generations in every slot (the fixture has 4), two completions and two chats; each
  // client hangs up without reading while its request decodes.
  constexpr int kMaxTokens = 480;
  constexpr int kRequests = 4;
  std::vector<std::unique_ptr<RawConnection>> clients;
  for (int i = 0; i < kRequests; ++i) {
    const bool chat = i % 2 == 1;
    Json body = completion(kMaxTokens, {{"ignore_eos", true}});
    if (chat) {
      body.erase("prompt");
      body["messages"] = {{{"role", "user"}, {"content", "write fibonacci " + std::to_string(i)}}};
    }
    clients.push_back(std::make_unique<RawConnection>(served_->port));
    ASSERT_TRUE(clients.back()->ok());
    clients.back()->send_all(http_request("POST", chat ? "/v1/chat/completions" : "/v1/completions",
                                          body.dump(), kAuth));
  }
  ASSERT_TRUE(wait_active(kRequests, 10000)) << "the requests never all started";
  for (auto& client : clients) client->close();

  // The slots are freed and each request is counted as closed by its client.
  EXPECT_TRUE(wait_idle(5000)) << "the abandoned requests kept their slots";
  EXPECT_EQ(wait_metric(kCompletions, completions_before + 2, 5000), completions_before + 2);
  EXPECT_EQ(wait_metric(kChat, chat_before + 2, 5000), chat_before + 2);
  // They stopped early: far fewer tokens than running to max_tokens would give.
  const double generated = metric(kGenerated) - generated_before;
  std::printf("the abandoned requests generated %.0f tokens\n", generated);
  EXPECT_LT(generated, kRequests * kMaxTokens / 2) << "the cancelled requests ran on";

  // The next request is served as usual.
  auto [status, reply] = post("/v1/completions", completion(8, {{"ignore_eos", true}}));
  EXPECT_EQ(status, 200) << reply.dump();
  EXPECT_EQ(reply["usage"]["completion_tokens"], 8);
}

}  // namespace
}  // namespace specd
