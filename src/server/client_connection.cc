// Looks a request's TCP socket up among this process's descriptors and peeks at it for a hangup.
#include "server/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

namespace specd::server {

namespace {

// The numeric host and port of an IPv4 or IPv6 address; false for other families.
bool host_and_port(const sockaddr_storage& addr, socklen_t length, std::string& host, int& port) {
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  } else {
    return false;
  }
  char text[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), length, text, sizeof(text), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return false;
  }
  host = text;
  return true;
}

bool matches(int fd, const ConnectionAddress& address) {
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t length = sizeof(addr);
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0 ||
      !host_and_port(addr, length, host, port) || port != address.local_port ||
      host != address.local_host) {
    return false;
  }
  length = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0 ||
      !host_and_port(addr, length, host, port)) {
    return false;
  }
  return port == address.remote_port && host == address.remote_host;
}

}  // namespace

int find_connection_socket(const ConnectionAddress& address) {
  if (address.local_port <= 0 || address.remote_port <= 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  const int own = dirfd(dir);
  int found = -1;
  // A TCP connection's two addresses are unique while it is open, and this one stays open while
  // its request is served, so descriptors opened or closed meanwhile cannot match by mistake.
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    if (matches(static_cast<int>(fd), address)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool peer_connected(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) < 0) return true;  // interrupted: no news
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
  if (!(p.revents & POLLIN)) return true;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;  // end of stream
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

bool ClientWatch::connected() {
  if (!searched_) {
    fd_ = find_connection_socket(address_);
    searched_ = true;
  }
  return fd_ < 0 || peer_connected(fd_);
}

}  // namespace specd::server
