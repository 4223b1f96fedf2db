#include "services/wire/shm_rendezvous.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/addresses.h"

namespace cohort {
namespace {

constexpr uint32_t kHello = 0x43524456;  // "CRDV": the listener's one message, with the fds
constexpr int kRingFds = 6;  // each ring's memory, data and space eventfds
constexpr int kMaxFds = 7;   // and the pool's memfd, where the listener offers one
// How long a dialer waits for a listener that has the connection queued but does not answer.
constexpr int kAnswerSeconds = 10;

// The abstract address of `name`: a leading NUL, then the name's bytes (no terminator).
absl::StatusOr<socklen_t> Abstract(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr->sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory rendezvous name '", name, "': needs 1 to ",
        sizeof(addr->sun_path) - 1, " bytes"));
  }
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

ShmRing::Fds FdsAt(const int* fds) { return ShmRing::Fds{fds[0], fds[1], fds[2]}; }

}  // namespace

ShmChannel::ShmChannel(std::unique_ptr<ShmRing> in, std::unique_ptr<ShmRing> out, int socket,
                       int peer_pid, std::shared_ptr<ShmRegion> pool)
    : in_(std::move(in)),
      out_(std::move(out)),
      socket_(socket),
      peer_pid_(peer_pid),
      pool_(std::move(pool)) {
  in_->WatchPeer(socket_);
  out_->WatchPeer(socket_);
}

ShmChannel::ShmChannel(ShmChannel&& other) noexcept
    : in_(std::move(other.in_)),
      out_(std::move(other.out_)),
      socket_(other.socket_),
      peer_pid_(other.peer_pid_),
      pool_(std::move(other.pool_)) {
  other.socket_ = -1;
}

ShmChannel::~ShmChannel() {
  // The other side's waits end (Cancelled) rather than wait for the socket's hang-up.
  if (in_ != nullptr) in_->Close();
  if (out_ != nullptr) out_->Close();
  if (socket_ >= 0) close(socket_);
}

absl::StatusOr<std::unique_ptr<ShmListener>> ShmListener::Listen(const std::string& name,
                                                                 size_t ring_bytes,
                                                                 size_t pool_bytes) {
  sockaddr_un addr;
  absl::StatusOr<socklen_t> len = Abstract(name, &addr);
  if (!len.ok()) return len.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "cannot make a Unix socket");
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), *len) != 0 || listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(
        err, absl::StrCat("cannot listen on the abstract Unix socket @", name,
                          err == EADDRINUSE ? " (another process of this host listens there)"
                                            : ""));
  }
  return std::unique_ptr<ShmListener>(new ShmListener(name, fd, ring_bytes, pool_bytes));
}

ShmListener::ShmListener(std::string name, int fd, size_t ring_bytes, size_t pool_bytes)
    : name_(std::move(name)), fd_(fd), ring_bytes_(ring_bytes), pool_bytes_(pool_bytes) {}

ShmListener::~ShmListener() { close(fd_); }

void ShmListener::Close() {
  closed_ = true;
  shutdown(fd_, SHUT_RDWR);  // a blocked accept returns (EINVAL)
}

absl::StatusOr<ShmChannel> ShmListener::Accept() {
  int socket = -1;
  ucred peer{};
  while (socket < 0) {
    if (closed_) return absl::CancelledError(absl::StrCat("@", name_, " closed"));
    socket = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (socket < 0 && errno != EINTR && errno != ECONNABORTED) {
      if (closed_) return absl::CancelledError(absl::StrCat("@", name_, " closed"));
      return absl::ErrnoToStatus(errno, absl::StrCat("accept on @", name_));
    }
    socklen_t len = sizeof peer;
    if (socket >= 0 &&
        (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != getuid())) {
      close(socket);  // another user's process: it dials the job's gRPC address instead
      socket = -1;
    }
  }
  absl::StatusOr<std::unique_ptr<ShmRing>> to_here = ShmRing::Create(ring_bytes_);
  absl::StatusOr<std::unique_ptr<ShmRing>> to_there = ShmRing::Create(ring_bytes_);
  absl::StatusOr<std::shared_ptr<ShmRegion>> pool = std::shared_ptr<ShmRegion>();
  if (pool_bytes_ > 0) pool = ShmRegion::Create(pool_bytes_, "a shared-memory pool");
  if (!to_here.ok() || !to_there.ok() || !pool.ok()) {
    close(socket);
    return !to_here.ok() ? to_here.status() : !to_there.ok() ? to_there.status() : pool.status();
  }
  const ShmRing::Fds a = (*to_here)->fds(), b = (*to_there)->fds();
  const int fds[kMaxFds] = {a.memory, a.data, a.space, b.memory, b.data, b.space,
                            *pool ? (*pool)->fd() : -1};
  const size_t fds_bytes = (*pool ? kMaxFds : kRingFds) * sizeof(int);
  uint32_t hello = kHello;
  iovec iov{&hello, sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(fds_bytes);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds_bytes);
  std::memcpy(CMSG_DATA(c), fds, fds_bytes);
  if (sendmsg(socket, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
    const int err = errno;
    close(socket);
    return absl::ErrnoToStatus(err, absl::StrCat("passing rings to a peer on @", name_));
  }
  return ShmChannel(*std::move(to_here), *std::move(to_there), socket, peer.pid,
                    *std::move(pool));
}

std::string ShardRendezvousName(absl::string_view host, int port) {
  return host.empty() ? absl::StrCat("cohort-shard-", port)
                      : absl::StrCat("cohort-shard-", host, ":", port);
}

std::string BackupRendezvousName(absl::string_view host, int port) {
  return absl::StrCat(ShardRendezvousName(host, port), "/replicas");
}

absl::StatusOr<ShmChannel> DialShardOnThisHost(absl::string_view address,
                                               std::string (*named)(absl::string_view host,
                                                                    int port)) {
  const int port = PortOfAddress(address);
  const absl::string_view host = HostOfAddress(address);
  if (port < 0 || !IsThisHostsAddress(host)) {
    return absl::NotFoundError(absl::StrCat(address, " is not this host's"));
  }
  absl::StatusOr<ShmChannel> channel = DialShm(named(host, port));
  if (!absl::IsNotFound(channel.status())) return channel;
  return DialShm(named("", port));
}

absl::StatusOr<ShmChannel> DialShm(const std::string& name) {
  sockaddr_un addr;
  absl::StatusOr<socklen_t> len = Abstract(name, &addr);
  if (!len.ok()) return len.status();
  const int socket = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (socket < 0) return absl::ErrnoToStatus(errno, "cannot make a Unix socket");
  // Neither a full backlog nor a listener that never answers keeps the dialer waiting long.
  const timeval timeout{kAnswerSeconds, 0};
  setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (connect(socket, reinterpret_cast<const sockaddr*>(&addr), *len) != 0) {
    const int err = errno;
    close(socket);
    return absl::NotFoundError(absl::StrCat("nobody listens on @", name,
                                            " in this network namespace: ", strerror(err)));
  }
  // Abstract names have no permissions: a process of another user could be listening in the
  // shard's place, and would get the pushes.
  ucred listener{};
  socklen_t cred_len = sizeof listener;
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &listener, &cred_len) != 0 ||
      listener.uid != getuid()) {
    close(socket);
    return absl::UnavailableError(absl::StrCat("@", name, " belongs to another user"));
  }
  uint32_t hello = 0;
  iovec iov{&hello, sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  const int err = errno;
  int fds[kMaxFds];
  const cmsghdr* c = CMSG_FIRSTHDR(&msg);
  const bool rights = c != nullptr && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS;
  // However many descriptors came, they are this process's now: close them if unused.
  const size_t received = rights ? (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) : 0;
  const bool have_fds = received == kRingFds || received == kMaxFds;
  if (have_fds) std::memcpy(fds, CMSG_DATA(c), received * sizeof(int));
  if (got != static_cast<ssize_t>(sizeof hello) || hello != kHello || !have_fds ||
      (msg.msg_flags & MSG_CTRUNC) != 0) {
    for (size_t i = 0; i < received; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      close(fd);
    }
    close(socket);
    return absl::UnavailableError(absl::StrCat(
        "@", name, " did not hand over its rings",
        got < 0 ? absl::StrCat(": ", strerror(err)) : std::string(" (not a cohort listener?)")));
  }
  absl::StatusOr<std::unique_ptr<ShmRing>> to_there = ShmRing::Attach(FdsAt(fds));
  absl::StatusOr<std::unique_ptr<ShmRing>> to_here = ShmRing::Attach(FdsAt(fds + 3));
  absl::StatusOr<std::shared_ptr<ShmRegion>> pool = std::shared_ptr<ShmRegion>();
  if (received == kMaxFds) pool = ShmRegion::Attach(fds[kRingFds], "a shared-memory pool");
  if (!to_there.ok() || !to_here.ok() || !pool.ok()) {
    close(socket);
    return !to_there.ok() ? to_there.status() : !to_here.ok() ? to_here.status() : pool.status();
  }
  return ShmChannel(*std::move(to_here), *std::move(to_there), socket, -1, *std::move(pool));
}

}  // namespace cohort
