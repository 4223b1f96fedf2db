#include "services/common/listen_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/addresses.h"

namespace cohort {

namespace {

// A listening socket on address, or -1 with *error set to errno.
int ListenOn(const sockaddr* address, socklen_t length, bool dual_stack, int* error) {
  const int fd = socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = errno;
    return -1;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // restart over TIME_WAIT
  if (address->sa_family == AF_INET6) {
    const int v6only = dual_stack ? 0 : 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  }
  if (bind(fd, address, length) != 0 || listen(fd, SOMAXCONN) != 0) {
    *error = errno;
    close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
}

}  // namespace

std::string SocketAddressText(const sockaddr* address, bool with_port) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    if (with_port) return absl::StrCat("[", host, "]:", port);
  }
  return with_port ? absl::StrCat(host, ":", port) : host;
}

absl::StatusOr<ListenSocket> ListenSocket::Open(const std::string& bind, int port) {
  const std::string where = absl::StrCat(bind, ":", port);
  int error = 0;
  if (IsAnyAddress(bind)) {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(static_cast<uint16_t>(port));
    int fd = ListenOn(reinterpret_cast<sockaddr*>(&any6), sizeof(any6), true, &error);
    if (fd < 0 && error != EADDRINUSE) {  // no IPv6 here: IPv4 alone
      sockaddr_in any4{};
      any4.sin_family = AF_INET;
      any4.sin_addr.s_addr = htonl(INADDR_ANY);
      any4.sin_port = htons(static_cast<uint16_t>(port));
      fd = ListenOn(reinterpret_cast<sockaddr*>(&any4), sizeof(any4), false, &error);
    }
    if (fd >= 0) return ListenSocket(fd, BoundPort(fd));
  } else {
    std::string host = bind;  // "[::1]" as gRPC's addresses write it
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const int looked_up =
        getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (looked_up != 0 || found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot listen on ", where, ": no such address (", gai_strerror(looked_up),
          "); give --bind an address of this host"));
    }
    const int fd = ListenOn(found->ai_addr, found->ai_addrlen, false, &error);
    freeaddrinfo(found);
    if (fd >= 0) return ListenSocket(fd, BoundPort(fd));
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot listen on ", where, ": ", std::strerror(error),
      "; pick another port (0 lets the system choose) or an address of this host"));
}

ListenSocket::ListenSocket(ListenSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}

ListenSocket& ListenSocket::operator=(ListenSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = other.port_;
  }
  return *this;
}

ListenSocket::~ListenSocket() {
  if (fd_ >= 0) close(fd_);
}

int ListenSocket::Release() { return std::exchange(fd_, -1); }

}  // namespace cohort
