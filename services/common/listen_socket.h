#ifndef COHORT_SERVICES_COMMON_LISTEN_SOCKET_H_
#define COHORT_SERVICES_COMMON_LISTEN_SOCKET_H_

#include <sys/socket.h>

#include <string>

#include "absl/status/statusor.h"

namespace cohort {

// A socket address as text: "10.0.0.2:5000", "[::1]:5000"; the address alone ("10.0.0.2",
// "::1") when with_port is false.
std::string SocketAddressText(const sockaddr* address, bool with_port);

// A TCP socket listening on one address, closed when destroyed unless released.
class ListenSocket {
 public:
  // Listens on bind:port (port 0: the kernel picks one). bind is an IPv4 address, a bracketed
  // or bare IPv6 one, or a name; every address ("", "0.0.0.0", "::", "[::]") listens on both
  // families where the kernel has IPv6, as gRPC does. Non-blocking, close-on-exec, without
  // SO_REUSEPORT (a second server must not share a taken port). The error names the address.
  static absl::StatusOr<ListenSocket> Open(const std::string& bind, int port);

  ListenSocket(ListenSocket&& other) noexcept;
  ListenSocket& operator=(ListenSocket&& other) noexcept;
  ~ListenSocket();

  int fd() const { return fd_; }
  int port() const { return port_; }
  // Gives up the descriptor to a new owner.
  int Release();

 private:
  ListenSocket(int fd, int port) : fd_(fd), port_(port) {}

  int fd_ = -1;
  int port_ = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_LISTEN_SOCKET_H_
