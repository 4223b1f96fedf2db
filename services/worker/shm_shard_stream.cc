#include "services/worker/shm_shard_stream.h"

#include <cerrno>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "services/common/addresses.h"
#include "services/wire/ring_stream.h"
#include "services/wire/shm_ring.h"

namespace cohort {
namespace {

// The stream over two shared-memory rings to a shard on this host: pushes are copied into one
// on the writer's thread; a thread of the stream's own reads the answers from the other.
class ShmShardStream final : public BulkStream {
 public:
  ShmShardStream(int shard, ShmChannel channel, AnswerReceiver* receiver, int64_t fusion_bytes,
                 absl::Duration fusion_wait, DeadlineTimer* timer)
      : BulkStream(shard, receiver, fusion_bytes, fusion_wait, timer),
        channel_(std::move(channel)),
        reading_([this] { ReadAnswers(); }) {}
  ~ShmShardStream() override { Cancel(); }

  void Cancel() override {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      cancelled_ = true;
      queue_.Clear();
    }
    // Wakes the reader, and a writer waiting for room; the shard's session sees them closed.
    channel_.in().Close();
    channel_.out().Close();
    if (reading_.joinable()) reading_.join();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](ShmShardStream* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return !s->writing_; },
        this));
  }

 private:
  void WriteBatch() override {
    for (;;) {
      const absl::Status written = writer_.Write(channel_.out(), batch_, kStuckShard);
      absl::MutexLock lock(&mu_);
      if (!written.ok()) {
        queue_.Clear();
        closing_ = true;
        // Closed or gone: the reader hears why from the shard. A message too large for the
        // ring, or a shard that takes nothing: the stream ends here, saying so.
        if (absl::IsInvalidArgument(written) || absl::IsDeadlineExceeded(written)) {
          write_error_ = absl::Status(
              written.code(),
              absl::StrCat("pushing to shard ", shard_, " on this host through shared memory: ",
                           written.message(),
                           absl::IsInvalidArgument(written)
                               ? "; use smaller --part_bytes and --fusion_bytes"
                               : ""));
          channel_.in().Close();
        }
      }
      if (closing_ || queue_.empty()) {
        writing_ = false;
        return;
      }
      queue_.Pop(&batch_);
    }
  }

  void ReadAnswers() {
    ShmRing& in = channel_.in();
    absl::Status end;
    for (;;) {
      absl::StatusOr<ShmRing::Message> m = in.Read();
      if (!m.ok()) {
        // Cancelled: closed here (Cancel), or by the shard, which ended the stream as a gRPC
        // shard finishing its call does (OK); Unavailable: the shard went away.
        end = m.status();
        if (absl::IsCancelled(end)) {
          absl::MutexLock lock(&mu_);
          end = cancelled_ ? absl::CancelledError("the shared-memory stream was cancelled")
                           : absl::OkStatus();
        }
        break;
      }
      if (std::optional<absl::Status> why = StreamEnd(m->bytes())) {
        end = *why;
        in.Release();
        break;
      }
      const absl::Status parsed = batch_in_.Parse(m->bytes());
      if (parsed.ok()) Deliver(batch_in_);
      batch_in_.Clear();
      in.Release();
      if (!parsed.ok()) {
        end = parsed;
        break;
      }
    }
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      queue_.Clear();
      if (!write_error_.ok()) end = write_error_;
    }
    channel_.in().Close();   // the shard's writer stops
    channel_.out().Close();  // and a writer here waiting for room
    receiver_->OnStreamEnd(shard_, end);
  }

  // How long a push may wait for room in the ring before the shard counts as stuck.
  static constexpr absl::Duration kStuckShard = absl::Seconds(60);

  ShmChannel channel_;
  RingBatchWriter writer_;  // the writer's
  absl::Status write_error_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // Cancel was called
  std::thread reading_;     // last: starts once the rest is built
};

}  // namespace

std::optional<ShmChannel> DialSameHost(int shard, const std::string& address) {
  const int port = PortOfAddress(address);
  if (port < 0 || !IsThisHostsAddress(HostOfAddress(address))) return std::nullopt;
  absl::StatusOr<ShmChannel> channel = DialShardOnThisHost(address, ShardRendezvousName);
  if (channel.ok()) return *std::move(channel);
  const absl::Status& failed = channel.status();
  std::cerr << program_invocation_short_name << ": shard " << shard << " at " << address
            << " is on this host, but "
            << (absl::IsNotFound(failed)
                    ? "offers no shared memory (its --shared_memory is off, or it listens "
                      "under another address)"
                    : absl::StrCat("its shared-memory path failed: ", failed.message()))
            << "; pushing to it over gRPC\n";
  return std::nullopt;
}

std::unique_ptr<BulkStream> MakeShmShardStream(int shard, ShmChannel channel,
                                               AnswerReceiver* receiver, int64_t fusion_bytes,
                                               absl::Duration fusion_wait, DeadlineTimer* timer) {
  return std::make_unique<ShmShardStream>(shard, std::move(channel), receiver, fusion_bytes,
                                          fusion_wait, timer);
}

}  // namespace cohort
