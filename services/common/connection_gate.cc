#include "services/common/connection_gate.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "services/common/clock.h"
#include "absl/time/time.h"

namespace cohort {

namespace {

constexpr unsigned char kTlsHandshakeRecord = 0x16;  // the content type of a ClientHello
constexpr unsigned char kHttp2Preface = 'P';         // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr int kAcceptsPerWake = 64;  // then the waiting ones get a turn


// fd + 1: the limiter's ids are pointers, and null means none.
ConnectionLimiter::Id IdOf(int fd) {
  return reinterpret_cast<ConnectionLimiter::Id>(static_cast<intptr_t>(fd) + 1);
}
int FdOf(ConnectionLimiter::Id id) {
  return static_cast<int>(reinterpret_cast<intptr_t>(id) - 1);
}

}  // namespace

absl::string_view ConnectionRefusalName(ConnectionRefusal reason) {
  switch (reason) {
    case ConnectionRefusal::kNotTls: return "not_tls";
    case ConnectionRefusal::kTlsOnPlaintext: return "tls_on_plaintext";
    case ConnectionRefusal::kNotGrpc: return "not_grpc";
    case ConnectionRefusal::kSilent: return "silent";
    case ConnectionRefusal::kTooMany: return "too_many";
  }
  return "unknown";
}

absl::string_view ConnectionRefusalSaid(ConnectionRefusal reason) {
  switch (reason) {
    case ConnectionRefusal::kNotTls:
      return "it did not open a TLS handshake, and this job takes only TLS (a process "
             "started without --tls_dir, or not a Cohort process)";
    case ConnectionRefusal::kTlsOnPlaintext:
      return "it opened a TLS handshake, and this job is plaintext (--insecure): start both "
             "sides with the same --tls_dir, or both with --insecure";
    case ConnectionRefusal::kNotGrpc:
      return "it did not speak gRPC (not a Cohort process)";
    case ConnectionRefusal::kSilent:
      return "it sent nothing in the time a connection has to begin";
    case ConnectionRefusal::kTooMany:
      return "its address (or all) held the most connections allowed to wait for their first "
             "bytes; the one waiting longest was closed";
  }
  return "";
}

std::optional<ConnectionRefusal> CheckOpening(Opening expected, unsigned char first) {
  if (expected == Opening::kTls) {
    if (first == kTlsHandshakeRecord) return std::nullopt;
    return ConnectionRefusal::kNotTls;
  }
  if (first == kHttp2Preface) return std::nullopt;
  return first == kTlsHandshakeRecord ? ConnectionRefusal::kTlsOnPlaintext
                                      : ConnectionRefusal::kNotGrpc;
}

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Start(ListenSocket socket,
                                                                      Opening expected,
                                                                      ConnectionLimits limits,
                                                                      Admit admit,
                                                                      Refuse refuse) {
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot make an eventfd for port ", socket.port(),
                                            ": ", std::strerror(errno)));
  }
  std::unique_ptr<ConnectionGate> gate(new ConnectionGate(
      std::move(socket), expected, limits, std::move(admit), std::move(refuse), wake_fd));
  gate->thread_ = std::thread([g = gate.get()] { g->Run(); });
  return gate;
}

ConnectionGate::ConnectionGate(ListenSocket socket, Opening expected, ConnectionLimits limits,
                               Admit admit, Refuse refuse, int wake_fd)
    : socket_(std::move(socket)),
      expected_(expected),
      limits_(limits),
      admit_(std::move(admit)),
      refuse_(std::move(refuse)),
      wake_fd_(wake_fd) {}

ConnectionGate::~ConnectionGate() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

void ConnectionGate::Run() {
  struct Waiting {
    std::string peer;  // "address:port"
    absl::Time since;
  };
  absl::flat_hash_map<int, Waiting> waiting;
  ConnectionLimiter limiter(limits_);
  // Closes a waiting connection, reporting why unless it hung up itself.
  const auto drop = [&](int fd, std::optional<ConnectionRefusal> reason) {
    limiter.Closed(IdOf(fd));
    if (reason.has_value()) refuse_(*reason, waiting[fd].peer);
    waiting.erase(fd);
    close(fd);
  };
  // A waiting connection whose first byte came is handed over (or refused for it), one that
  // hung up is closed; false while it has sent nothing.
  const auto settle = [&](int fd) {
    unsigned char first = 0;
    const ssize_t got = recv(fd, &first, 1, MSG_PEEK);
    if (got == 1) {
      const std::optional<ConnectionRefusal> refusal = CheckOpening(expected_, first);
      if (refusal.has_value()) {
        drop(fd, refusal);
      } else {
        limiter.Closed(IdOf(fd));
        waiting.erase(fd);
        admit_(fd);
      }
      return true;
    }
    if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
      drop(fd, std::nullopt);  // hung up without a word: a port check, not a refusal
      return true;
    }
    return false;
  };
  bool accepting = true;  // false for a moment after the process ran out of descriptors
  std::vector<pollfd> polled;
  std::vector<int> ready;
  while (true) {
    polled.clear();
    polled.push_back({wake_fd_, POLLIN, 0});
    polled.push_back({accepting ? socket_.fd() : -1, POLLIN, 0});
    absl::Time next_deadline = absl::InfiniteFuture();
    for (const auto& [fd, w] : waiting) {
      polled.push_back({fd, POLLIN, 0});
      next_deadline = std::min(next_deadline, w.since + limits_.request_deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != absl::InfiniteFuture()) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, absl::ToInt64Milliseconds(next_deadline - SteadyNow()) + 1));
    }
    if (!accepting) timeout_ms = timeout_ms < 0 ? 100 : std::min(timeout_ms, 100);
    if (poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (polled[0].revents != 0) break;
    accepting = true;

    // Those whose first byte came (or that hung up) go first: a new connection cannot evict them.
    ready.clear();
    for (size_t i = 2; i < polled.size(); ++i) {
      if (polled[i].revents != 0) ready.push_back(polled[i].fd);
    }
    for (int fd : ready) settle(fd);
    const absl::Time now = SteadyNow();
    ready.clear();
    for (const auto& [fd, w] : waiting) {
      if (now - w.since >= limits_.request_deadline) ready.push_back(fd);
    }
    for (int fd : ready) drop(fd, ConnectionRefusal::kSilent);

    if (polled[1].revents == 0) continue;
    for (int accepted = 0; accepted < kAcceptsPerWake; ++accepted) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      const int fd = accept4(socket_.fd(), reinterpret_cast<sockaddr*>(&address), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accepting = false;  // poll would wake at once again: wait a little
        }
        break;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // as gRPC's own listener
      const auto* peer = reinterpret_cast<const sockaddr*>(&address);
      waiting[fd] = Waiting{SocketAddressText(peer, true), now};
      for (ConnectionLimiter::Id id :
           limiter.Opened(IdOf(fd), SocketAddressText(peer, false), now)) {
        // Its first byte may have come since the last poll (a burst of a thousand workers
        // connecting at once from one address): it is no longer waiting, only unread.
        const int closing = FdOf(id);
        if (settle(closing)) continue;
        drop(closing, now - waiting[closing].since >= limits_.request_deadline
                          ? ConnectionRefusal::kSilent
                          : ConnectionRefusal::kTooMany);
      }
    }
  }
  for (const auto& [fd, w] : waiting) close(fd);
}

}  // namespace cohort
