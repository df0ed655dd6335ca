// Finds an HTTP request's socket in this process and checks whether its client is still there.
#pragma once

#include <string>
#include <utility>

namespace specd::server {

// The numeric addresses and ports of one accepted TCP connection, as httplib reports them.
struct ConnectionAddress {
  std::string local_host;
  int local_port = -1;
  std::string remote_host;
  int remote_port = -1;
};

// The descriptor of this process's connected TCP socket with exactly these addresses, or -1
// (e.g. without /proc). It stays valid only while its connection is being served.
int find_connection_socket(const ConnectionAddress& address);

// False once the peer has closed or reset the connection (a hangup, an error, or the end of the
// stream). Unread bytes, such as a pipelined request, count as connected. Never blocks or reads.
// A client that only shuts down its sending side reads as gone too.
bool peer_connected(int fd);

// Watches the client of one request that is being served on the caller's thread.
class ClientWatch {
 public:
  explicit ClientWatch(ConnectionAddress address) : address_(std::move(address)) {}
  // False once the client has gone; true while it is connected or its socket cannot be found.
  // The socket is looked up on the first call, so a request that never waits pays nothing.
  bool connected();

 private:
  ConnectionAddress address_;
  bool searched_ = false;
  int fd_ = -1;
};

}  // namespace specd::server
