#ifndef COHORT_SERVICES_WIRE_SHM_RING_H_
#define COHORT_SERVICES_WIRE_SHM_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "services/wire/byte_chunks.h"
#include "services/wire/shm_region.h"

namespace cohort {

// A one-way channel of messages between two processes on one host: a ring of bytes in shared
// memory that one producer writes and one consumer reads in place. A message costs two copies
// of nothing beyond its bytes (in, then read where it lies) and a wake-up only when the other
// side sleeps: no sockets, no framing, no polling threads in between.
//
// The side that creates the ring passes its three descriptors (the memory and two eventfds) to
// the other process, e.g. over a Unix socket, which then attaches to them. Either side may give
// a peer descriptor (that socket): a wait that sees it hang up fails, so a peer that died never
// leaves the other waiting.
class ShmRing {
 public:
  struct Fds {
    int memory = -1;  // memfd: the header and the ring
    int data = -1;    // eventfd the producer writes when a sleeping consumer has a message
    int space = -1;   // eventfd the consumer writes when a sleeping producer has room
  };
  // A message as it lies in the ring: one chunk, or two where it wraps around the end. Valid
  // until Release.
  struct Message {
    absl::Span<const char> chunks[2];
    size_t num_chunks = 0;
    ByteChunks bytes() const { return ByteChunks(chunks, num_chunks); }
  };

  // A new ring of `capacity` bytes (a power of two, at least 4096); the largest message is
  // capacity - 8 bytes.
  static absl::StatusOr<std::unique_ptr<ShmRing>> Create(size_t capacity);
  // The ring another process created, from its descriptors; takes them over.
  static absl::StatusOr<std::unique_ptr<ShmRing>> Attach(Fds fds);
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  // The descriptors to hand to the other process (still owned here).
  Fds fds() const { return Fds{memory_->fd(), data_fd_, space_fd_}; }
  // Waits also watch `fd` (not owned) and fail with Unavailable once it hangs up.
  void WatchPeer(int fd) { peer_ = fd; }

  // Producer: appends one message, the pieces' bytes in order; waits while the ring lacks room,
  // up to `timeout` (then DeadlineExceeded). InvalidArgument when it could never fit; Cancelled
  // once the ring is closed; Unavailable when the peer went away.
  absl::Status Write(absl::Span<const absl::Span<const char>> pieces,
                     absl::Duration timeout = absl::InfiniteDuration());

  // Consumer: the next message, waiting for one; Release gives its bytes back before the next
  // Read. Cancelled once the ring is closed and drained; Unavailable when the peer went away
  // with nothing left to read.
  absl::StatusOr<Message> Read();
  void Release();

  // Either side: wakes and fails the other's waits (and this side's own next ones).
  void Close();
  // Whether either side has closed it.
  bool closed() const;

 private:
  struct Header;
  ShmRing(std::shared_ptr<ShmRegion> memory, int data, int space, size_t capacity);
  // Returns once ready() holds, sleeping on `eventfd` (flagged in `sleeping` for the other
  // side) while it does not. Cancelled when the ring is closed first; Unavailable when the peer
  // went away and ready() still fails; DeadlineExceeded past the deadline.
  template <typename Ready>
  absl::Status WaitUntil(const Ready& ready, int eventfd, std::atomic<uint32_t>& sleeping,
                         absl::Time deadline);
  // Sleeps on `eventfd` (and the peer) until it is written, or the deadline.
  absl::Status Wait(int eventfd, std::atomic<uint32_t>& sleeping, absl::Time deadline);
  void Wake(int eventfd, std::atomic<uint32_t>& sleeping);

  const std::shared_ptr<ShmRegion> memory_;  // the header's page, then the ring
  const int data_fd_;                         // the eventfds (Fds::data, Fds::space)
  const int space_fd_;
  size_t capacity_;
  Header* header_;
  char* data_;
  int peer_ = -1;
  uint64_t pending_release_ = 0;  // the last Read's bytes, header included
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_SHM_RING_H_
