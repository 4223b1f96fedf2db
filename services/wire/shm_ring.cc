#include "services/wire/shm_ring.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace cohort {

namespace {

constexpr uint32_t kMagic = 0x43534852;  // "CSHR"
constexpr size_t kHeaderBytes = 4096;    // the header's page, then the ring
constexpr size_t kLengthBytes = 8;       // each message's length, before its bytes

size_t Padded(size_t bytes) { return (bytes + 7) & ~size_t{7}; }

void CloseEventFds(int data, int space) {
  for (int fd : {data, space}) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace

// In the shared page. Positions count bytes since the start and only grow; each side writes its
// own and reads the other's. The sleeping flags and positions are sequentially consistent, so a
// side that goes to sleep either sees the other's last move or is seen asleep and woken.
struct ShmRing::Header {
  uint32_t magic;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> write_pos;
  alignas(64) std::atomic<uint64_t> read_pos;
  alignas(64) std::atomic<uint32_t> consumer_sleeping;
  std::atomic<uint32_t> producer_sleeping;
  std::atomic<uint32_t> closed;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "atomics shared between processes");

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Create(size_t capacity) {
  if (capacity < 4096 || (capacity & (capacity - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory ring of ", capacity, " bytes: needs a power of two >= 4096"));
  }
  const int data = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int space = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (data < 0 || space < 0) {
    const int err = errno;
    CloseEventFds(data, space);
    return absl::ErrnoToStatus(err, "cannot create a shared-memory ring's eventfds");
  }
  absl::StatusOr<std::shared_ptr<ShmRegion>> memory =
      ShmRegion::Create(kHeaderBytes + capacity, "a shared-memory ring");
  if (!memory.ok()) {
    CloseEventFds(data, space);
    return memory.status();
  }
  // A fresh memfd reads as zeros: positions, flags and `closed` start at 0.
  Header* header = reinterpret_cast<Header*>((*memory)->data());
  header->capacity = capacity;
  header->magic = kMagic;
  return std::unique_ptr<ShmRing>(new ShmRing(*std::move(memory), data, space, capacity));
}

absl::StatusOr<std::unique_ptr<ShmRing>> ShmRing::Attach(Fds fds) {
  absl::StatusOr<std::shared_ptr<ShmRegion>> memory =
      ShmRegion::Attach(fds.memory, "a shared-memory ring");
  if (!memory.ok()) {
    CloseEventFds(fds.data, fds.space);
    return memory.status();
  }
  const size_t bytes = (*memory)->size();
  const Header* header = reinterpret_cast<const Header*>((*memory)->data());
  // Read once: the other side could change it.
  const size_t capacity = bytes > kHeaderBytes ? header->capacity : 0;
  if (bytes <= kHeaderBytes || header->magic != kMagic || capacity + kHeaderBytes != bytes ||
      capacity < 4096 || (capacity & (capacity - 1)) != 0) {
    CloseEventFds(fds.data, fds.space);
    return absl::InvalidArgumentError(
        "the descriptor passed as a shared-memory ring is not one (wrong magic or size)");
  }
  return std::unique_ptr<ShmRing>(
      new ShmRing(*std::move(memory), fds.data, fds.space, capacity));
}

ShmRing::ShmRing(std::shared_ptr<ShmRegion> memory, int data, int space, size_t capacity)
    : memory_(std::move(memory)),
      data_fd_(data),
      space_fd_(space),
      capacity_(capacity),
      header_(reinterpret_cast<Header*>(memory_->data())),
      data_(memory_->data() + kHeaderBytes) {
  static_assert(sizeof(Header) <= kHeaderBytes);
}

ShmRing::~ShmRing() { CloseEventFds(data_fd_, space_fd_); }

absl::Status ShmRing::Write(absl::Span<const absl::Span<const char>> pieces,
                            absl::Duration timeout) {
  size_t length = 0;
  for (absl::Span<const char> p : pieces) length += p.size();
  const uint64_t need = kLengthBytes + Padded(length);
  if (need > capacity_) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", length,
                                                   " bytes does not fit a shared-memory ring of ",
                                                   capacity_, " bytes"));
  }
  const uint64_t w = header_->write_pos.load(std::memory_order_relaxed);
  auto fits = [&] { return capacity_ - (w - header_->read_pos.load()) >= need; };
  if (absl::Status s = WaitUntil(fits, space_fd_, header_->producer_sleeping,
                                 absl::Now() + timeout);
      !s.ok()) {
    return s;
  }
  if (header_->closed.load()) return absl::CancelledError("the shared-memory ring was closed");
  const uint64_t mask = capacity_ - 1;
  std::memcpy(data_ + (w & mask), &length, kLengthBytes);  // 8-aligned: never wraps
  uint64_t at = w + kLengthBytes;
  for (absl::Span<const char> p : pieces) {
    const size_t offset = at & mask;
    const size_t first = std::min(p.size(), capacity_ - offset);
    std::memcpy(data_ + offset, p.data(), first);
    std::memcpy(data_, p.data() + first, p.size() - first);
    at += p.size();
  }
  header_->write_pos.store(w + need);
  Wake(data_fd_, header_->consumer_sleeping);
  return absl::OkStatus();
}

absl::StatusOr<ShmRing::Message> ShmRing::Read() {
  const uint64_t r = header_->read_pos.load(std::memory_order_relaxed);
  auto ready = [&] { return header_->write_pos.load() != r; };
  if (absl::Status s = WaitUntil(ready, data_fd_, header_->consumer_sleeping,
                                 absl::InfiniteFuture());
      !s.ok()) {
    return s;
  }
  const uint64_t mask = capacity_ - 1;
  uint64_t length = 0;
  std::memcpy(&length, data_ + (r & mask), kLengthBytes);
  // The other side's numbers, checked before use: a length past what was written (or one that
  // would wrap when padded) reads out of the ring.
  if (length > capacity_ - kLengthBytes ||
      kLengthBytes + Padded(length) > header_->write_pos.load() - r) {
    return absl::DataLossError(
        absl::StrCat("a shared-memory ring holds a message of ", length,
                     " bytes, more than was written: its memory was overwritten"));
  }
  Message m;
  const size_t offset = (r + kLengthBytes) & mask;
  const size_t first = std::min<size_t>(length, capacity_ - offset);
  m.chunks[m.num_chunks++] = absl::Span<const char>(data_ + offset, first);
  if (first < length) m.chunks[m.num_chunks++] = absl::Span<const char>(data_, length - first);
  pending_release_ = kLengthBytes + Padded(length);
  return m;
}

void ShmRing::Release() {
  if (pending_release_ == 0) return;
  header_->read_pos.store(header_->read_pos.load(std::memory_order_relaxed) + pending_release_);
  pending_release_ = 0;
  Wake(space_fd_, header_->producer_sleeping);
}

bool ShmRing::closed() const { return header_->closed.load() != 0; }

void ShmRing::Close() {
  header_->closed.store(1);
  const uint64_t one = 1;
  for (int fd : {data_fd_, space_fd_}) {
    [[maybe_unused]] ssize_t n = write(fd, &one, sizeof(one));
  }
}

template <typename Ready>
absl::Status ShmRing::WaitUntil(const Ready& ready, int eventfd,
                                std::atomic<uint32_t>& sleeping, absl::Time deadline) {
  while (!ready()) {
    if (header_->closed.load()) return absl::CancelledError("the shared-memory ring was closed");
    sleeping.store(1);
    if (ready()) {  // moved after all: the other side may not have seen the flag
      sleeping.store(0);
      break;
    }
    const absl::Status waited = Wait(eventfd, sleeping, deadline);
    if (!waited.ok() && !ready()) return waited;
  }
  return absl::OkStatus();
}

absl::Status ShmRing::Wait(int eventfd, std::atomic<uint32_t>& sleeping, absl::Time deadline) {
  pollfd polled[2] = {{eventfd, POLLIN, 0}, {peer_, POLLRDHUP, 0}};
  const nfds_t n = peer_ >= 0 ? 2 : 1;
  absl::Status status;
  for (;;) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        status = absl::DeadlineExceededError(
            "the other end of a shared-memory ring has not moved in time (stopped or stuck?)");
        break;
      }
      timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    }
    const int ready = poll(polled, n, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      status = absl::ErrnoToStatus(errno, "waiting on a shared-memory ring");
      break;
    }
    if (ready == 0) continue;  // the deadline, checked above
    if (polled[0].revents & POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t r = read(eventfd, &count, sizeof(count));  // resets it
      break;
    }
    if (n == 2 && (polled[1].revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) {
      status = absl::UnavailableError(
          "the process at the other end of a shared-memory ring went away");
      break;
    }
  }
  sleeping.store(0);
  return status;
}

void ShmRing::Wake(int eventfd, std::atomic<uint32_t>& sleeping) {
  if (sleeping.load() == 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(eventfd, &one, sizeof(one));
}

}  // namespace cohort
