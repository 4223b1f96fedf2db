#ifndef COHORT_SERVICES_COMMON_CONNECTION_GATE_H_
#define COHORT_SERVICES_COMMON_CONNECTION_GATE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/common/connection_limiter.h"
#include "services/common/listen_socket.h"

namespace cohort {

// How a gRPC port's connections must open: a TLS job's with a TLS handshake record, a plaintext
// (--insecure) job's with HTTP/2's preface.
enum class Opening { kTls, kHttp2 };

// Why a connection was closed before any handshake: the label of
// cohort_refused_connections_total{reason}.
enum class ConnectionRefusal { kNotTls, kTlsOnPlaintext, kNotGrpc, kSilent, kTooMany };
inline constexpr int kConnectionRefusalKinds = 5;
absl::string_view ConnectionRefusalName(ConnectionRefusal reason);  // "not_tls", ...
// What a person reads about it: the cause and what to do.
absl::string_view ConnectionRefusalSaid(ConnectionRefusal reason);

// The refusal of a connection whose first byte is `first`, if any.
std::optional<ConnectionRefusal> CheckOpening(Opening expected, unsigned char first);

// Accepts the connections of a listening socket and hands a server only those that open as it
// expects (CheckOpening); the others are closed and reported with the peer's address, before a
// handshake, so that neither plaintext on a TLS port nor TLS on a plaintext one reaches gRPC
// (which logs them without the peer). A connection that sends nothing within
// limits.request_deadline, or that takes its address (all) past the limits while waiting for its
// first byte, is closed too (ConnectionLimiter). One thread; poll(2) over the waiting ones.
class ConnectionGate {
 public:
  using Admit = std::function<void(int fd)>;  // takes the connection (non-blocking, NODELAY)
  // peer: "address:port"
  using Refuse = std::function<void(ConnectionRefusal reason, const std::string& peer)>;

  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Start(ListenSocket socket,
                                                               Opening expected,
                                                               ConnectionLimits limits, Admit admit,
                                                               Refuse refuse);
  // Stops accepting; the connections still waiting are closed.
  ~ConnectionGate();

  int port() const { return socket_.port(); }
  int listener_fd() const { return socket_.fd(); }

 private:
  ConnectionGate(ListenSocket socket, Opening expected, ConnectionLimits limits, Admit admit,
                 Refuse refuse, int wake_fd);
  void Run();

  ListenSocket socket_;
  const Opening expected_;
  const ConnectionLimits limits_;
  const Admit admit_;
  const Refuse refuse_;
  const int wake_fd_;  // an eventfd the destructor writes to end Run
  std::thread thread_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_CONNECTION_GATE_H_
