#include "services/membership/host_meetings.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cohort {
namespace {

// How often a visitor tries a place not open yet (its leader has not reached the barrier).
constexpr int kRetryMs = 2;
constexpr size_t kMaxMessage = 64 << 10;

// The socket address of a place, in the abstract namespace (no file: gone with its socket).
socklen_t AddressOf(const std::string& place, sockaddr_un* address) {
  std::memset(address, 0, sizeof(*address));
  address->sun_family = AF_UNIX;
  const size_t n = std::min(place.size(), sizeof(address->sun_path) - 1);
  std::memcpy(address->sun_path + 1, place.data(), n);  // sun_path[0] == 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// Messages: fixed-width numbers in this host's byte order, then strings each after its length.
void PutNumber(std::string* out, uint64_t v) { out->append(reinterpret_cast<char*>(&v), 8); }
void PutString(std::string* out, absl::string_view s) {
  PutNumber(out, s.size());
  out->append(s.data(), s.size());
}
bool TakeNumber(absl::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  std::memcpy(v, in->data(), 8);
  in->remove_prefix(8);
  return true;
}
bool TakeString(absl::string_view* in, std::string* s) {
  uint64_t n = 0;
  if (!TakeNumber(in, &n) || in->size() < n) return false;
  s->assign(in->data(), n);
  in->remove_prefix(n);
  return true;
}

std::string EncodeArrival(const HostMeetings::Arrival& a) {
  std::string out;
  PutNumber(&out, static_cast<uint64_t>(a.rank));
  PutNumber(&out, a.fingerprint);
  PutString(&out, a.name.substr(0, 4096));
  return out;
}
bool DecodeArrival(absl::string_view in, HostMeetings::Arrival* a) {
  uint64_t rank = 0;
  if (!TakeNumber(&in, &rank) || !TakeNumber(&in, &a->fingerprint)) return false;
  a->rank = static_cast<int>(rank);
  return TakeString(&in, &a->name);
}

// A release: the fingerprint, or the status with its payloads (a new generation's number).
std::string EncodeRelease(const absl::StatusOr<uint64_t>& result) {
  std::string out;
  const absl::Status& status = result.status();
  PutNumber(&out, static_cast<uint64_t>(status.code()));
  PutNumber(&out, result.ok() ? *result : 0);
  PutString(&out, status.message().substr(0, 16 << 10));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    PutString(&out, url);
    PutString(&out, std::string(payload).substr(0, 1024));
  });
  return out;
}
absl::StatusOr<uint64_t> DecodeRelease(absl::string_view in) {
  uint64_t code = 0;
  uint64_t fingerprint = 0;
  std::string message;
  if (!TakeNumber(&in, &code) || !TakeNumber(&in, &fingerprint) || !TakeString(&in, &message)) {
    return absl::DataLossError("a malformed release from the host's barrier leader");
  }
  if (code == 0) return fingerprint;
  absl::Status status(static_cast<absl::StatusCode>(code), message);
  std::string url;
  std::string payload;
  while (TakeString(&in, &url) && TakeString(&in, &payload)) {
    status.SetPayload(url, absl::Cord(payload));
  }
  return status;
}

// One message from a SOCK_SEQPACKET socket into `buffer`; nullopt at its end (or a reset).
std::optional<absl::string_view> ReceiveMessage(int fd, std::vector<char>& buffer,
                                                bool* would_block) {
  const ssize_t n = recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
  *would_block = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  if (n <= 0) return std::nullopt;
  return absl::string_view(buffer.data(), n);
}

bool SendMessage(int fd, const std::string& message) {
  return send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
         static_cast<ssize_t>(message.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostMeetings>> HostMeetings::Create() {
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll < 0 || wake < 0) {
    const int err = errno;
    if (epoll >= 0) close(epoll);
    if (wake >= 0) close(wake);
    return absl::ErrnoToStatus(err, "cannot start the host's barrier meetings (epoll, eventfd)");
  }
  return std::unique_ptr<HostMeetings>(new HostMeetings(epoll, wake));
}

HostMeetings::HostMeetings(int epoll, int wake)
    : epoll_(epoll), wake_(wake), uid_(getuid()), receive_buffer_(kMaxMessage) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
  thread_ = std::thread([this] { Loop(); });
}

HostMeetings::~HostMeetings() {
  stopping_ = true;
  Wake();
  thread_.join();
  absl::MutexLock lock(&mu_);
  for (const auto& [fd, owner] : owners_) close(fd);
  close(wake_);
  close(epoll_);
}

void HostMeetings::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_, &one, sizeof(one));
}

void HostMeetings::Watch(int fd, Owner owner) {
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = fd;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
  owners_[fd] = std::move(owner);
}

void HostMeetings::Forget(int fd) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  owners_.erase(fd);
  close(fd);
}

void HostMeetings::Lead(const std::string& place, int others, Done done, Forward forward) {
  Callbacks later;
  {
    absl::MutexLock lock(&mu_);
    if (auto closed = closed_.find(place); closed != closed_.end()) {
      later.push_back([done = std::move(done), why = closed->second] { done(why); });
    } else {
      Leader& leader = leaders_[place];
      if (leader.listener < 0) {
        sockaddr_un address;
        const socklen_t length = AddressOf(place, &address);
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
            listen(fd, SOMAXCONN) != 0) {
          const absl::Status failed = absl::ErrnoToStatus(
              errno, absl::StrCat("cannot open the barrier meeting of this host's workers at "
                                  "the abstract Unix socket @", place));
          if (fd >= 0) close(fd);
          leaders_.erase(place);
          later.push_back([done = std::move(done), failed] { done(failed); });
        } else {
          leader.listener = fd;
          Watch(fd, Owner{Owner::kListener, place});
        }
      }
      if (later.empty()) {
        leader.others = others;
        leader.done = std::move(done);
        leader.forward = std::move(forward);
        MaybeForward(place, leader, later);
      }
    }
  }
  for (auto& f : later) f();
}

void HostMeetings::MaybeForward(const std::string& place, Leader& leader, Callbacks& later) {
  if (!leader.done || leader.forwarded || static_cast<int>(leader.arrived.size()) < leader.others) {
    return;
  }
  leader.forwarded = true;
  std::vector<Arrival> others;
  others.reserve(leader.arrived.size());
  for (const auto& [fd, arrival] : leader.arrived) others.push_back(arrival);
  later.push_back([this, place, others = std::move(others), forward = leader.forward]() mutable {
    forward(std::move(others),
            [this, place](absl::StatusOr<uint64_t> result) { Release(place, result); });
  });
}

void HostMeetings::Release(const std::string& place, const absl::StatusOr<uint64_t>& result) {
  Done done;
  {
    absl::MutexLock lock(&mu_);
    auto it = leaders_.find(place);
    if (it == leaders_.end() || !it->second.forwarded) return;  // closed meanwhile
    Leader& leader = it->second;
    const std::string message = EncodeRelease(result);
    // A worker that cannot be told died: its membership moves on, as its death shows.
    for (const auto& [fd, arrival] : leader.arrived) SendMessage(fd, message);
    leader.arrived.clear();
    leader.forwarded = false;
    done = std::move(leader.done);
    leader.done = nullptr;
  }
  done(result);
}

void HostMeetings::Join(const std::string& place, Arrival mine, Done done) {
  Callbacks later;
  {
    absl::MutexLock lock(&mu_);
    if (auto closed = closed_.find(place); closed != closed_.end()) {
      later.push_back([done = std::move(done), why = closed->second] { done(why); });
    } else {
      Visitor& visitor = visitors_[{place, mine.rank}];
      visitor.mine = std::move(mine);
      visitor.done = std::move(done);
      Visit(place, visitor, later);
    }
  }
  for (auto& f : later) f();
}

void HostMeetings::Visit(const std::string& place, Visitor& visitor, Callbacks& later) {
  if (visitor.fd < 0) {
    sockaddr_un address;
    const socklen_t length = AddressOf(place, &address);
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
      if (fd >= 0) close(fd);
      // Not open yet (its leader has not come); tried again from the loop.
      if (!retry_) {
        retry_ = true;
        Wake();
      }
      return;
    }
    visitor.fd = fd;
    Watch(fd, Owner{Owner::kVisitor, place, visitor.mine.rank});
  }
  if (!SendMessage(visitor.fd, EncodeArrival(visitor.mine))) {
    later.push_back([done = std::move(visitor.done), place] {
      done(absl::UnavailableError(absl::StrCat(
          "cannot reach the barrier meeting of this host's workers at @", place, ": ",
          std::strerror(errno))));
    });
    visitor.done = nullptr;
  }
}

void HostMeetings::Close(const std::string& place, absl::Status why) {
  absl::MutexLock lock(&mu_);
  Callbacks& later = closed_waiters_;
  {
    if (!closed_.try_emplace(place, why).second) return;
    if (auto it = leaders_.find(place); it != leaders_.end()) {
      Leader& leader = it->second;
      if (leader.done) later.push_back([done = std::move(leader.done), why] { done(why); });
      for (const auto& [fd, arrival] : leader.arrived) Forget(fd);
      std::vector<int> connections;
      for (const auto& [fd, owner] : owners_) {
        if (owner.kind == Owner::kConnection && owner.place == place) connections.push_back(fd);
      }
      for (int fd : connections) Forget(fd);
      Forget(leader.listener);
      leaders_.erase(it);
    }
    for (auto it = visitors_.lower_bound({place, INT32_MIN});
         it != visitors_.end() && it->first.first == place;) {
      Visitor& visitor = it->second;
      if (visitor.done) later.push_back([done = std::move(visitor.done), why] { done(why); });
      if (visitor.fd >= 0) Forget(visitor.fd);
      it = visitors_.erase(it);
    }
  }
  if (!later.empty()) Wake();
}

void HostMeetings::OnReady(int fd, Callbacks& later) {
  auto found = owners_.find(fd);
  if (found == owners_.end()) return;
  const Owner owner = found->second;
  if (owner.kind == Owner::kListener) {
    for (;;) {
      const int connection = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (connection < 0) break;
      ucred peer{};
      socklen_t length = sizeof(peer);
      if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
          peer.uid != uid_) {
        close(connection);  // another user's process: not one of this job's workers
        continue;
      }
      Watch(connection, Owner{Owner::kConnection, owner.place});
    }
    return;
  }
  bool would_block = false;
  const std::optional<absl::string_view> message =
      ReceiveMessage(fd, receive_buffer_, &would_block);
  if (owner.kind == Owner::kConnection) {
    auto leader = leaders_.find(owner.place);
    Arrival arrival;
    if (message.has_value() && leader != leaders_.end() && DecodeArrival(*message, &arrival)) {
      leader->second.arrived[fd] = std::move(arrival);
      MaybeForward(owner.place, leader->second, later);
    } else if (!would_block) {
      // A worker gone (or speaking nonsense): its death moves the membership on.
      if (leader != leaders_.end() && !leader->second.forwarded) leader->second.arrived.erase(fd);
      Forget(fd);
    }
    return;
  }
  auto visitor = visitors_.find({owner.place, owner.rank});
  if (visitor == visitors_.end()) return;
  if (message.has_value()) {
    if (visitor->second.done) {
      later.push_back([done = std::move(visitor->second.done), result = DecodeRelease(*message)] {
        done(result);
      });
      visitor->second.done = nullptr;
    }
  } else if (!would_block) {
    // The leader is gone: its death moves the membership on, and Close tells the visitor.
    Forget(fd);
    visitor->second.fd = -1;
  }
}

void HostMeetings::Loop() {
  epoll_event events[64];
  absl::Time next_retry = absl::InfinitePast();
  while (!stopping_) {
    int timeout = -1;
    {
      absl::MutexLock lock(&mu_);
      if (retry_) timeout = kRetryMs;
    }
    const int n = epoll_wait(epoll_, events, 64, timeout);
    Callbacks later;
    {
      absl::MutexLock lock(&mu_);
      later.swap(closed_waiters_);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.fd == wake_) {
          uint64_t count;
          (void)!read(wake_, &count, sizeof(count));
          continue;
        }
        OnReady(events[i].data.fd, later);
      }
      if (retry_ && absl::Now() >= next_retry) {
        retry_ = false;
        next_retry = absl::Now() + absl::Milliseconds(kRetryMs);
        for (auto& [key, visitor] : visitors_) {
          if (visitor.fd < 0 && visitor.done) Visit(key.first, visitor, later);
        }
      }
    }
    for (auto& f : later) f();
  }
}

}  // namespace cohort
