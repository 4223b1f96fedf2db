#include "services/shard/shm_push_server.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/shard/push_handler.h"
#include "services/shard/shard_metrics.h"
#include "services/wire/part_write_queue.h"
#include "services/wire/ring_stream.h"

namespace cohort {
namespace {

// One worker's pushes and answers over a channel: a reading thread hands each message to the
// core (PushHandler); answers queue (PartWriteQueue: model order, small ones fused) for a
// writing thread, so the core's threads never wait on a ring. Ends when the worker closes its
// side, goes away, or a push is refused (the reason goes back as the stream's last message).
class ShmPushSession final : public PushStream, public ShmSession {
 public:
  ShmPushSession(ShardCore* core, ShmChannel channel)
      : core_(core),
        channel_(std::move(channel)),
        handler_(core, absl::StrCat("pid ", channel_.peer_pid(), " on this host")) {
    if (const std::optional<ShardConfig> config = core->config()) {
      absl::MutexLock lock(&mu_);
      queue_.set_fusion_bytes(config->fusion_bytes);
    }
    reading_ = std::thread([this] { Read(); });
    writing_ = std::thread([this] { Write(); });
  }

  ~ShmPushSession() override {
    End(absl::OkStatus());
    channel_.in().Close();   // wakes the reader
    channel_.out().Close();  // and the writer, should the worker have stopped reading
    reading_.join();
    writing_.join();
  }

  // Both threads are done: the session can go.
  bool finished() override {
    absl::MutexLock lock(&mu_);
    return read_done_ && write_done_;
  }

  void Send(PartId id, int64_t version, absl::Span<const float> value, PinCount* pin) override {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    queue_.Push(AnswerPart(id, version, value, pin, answer_encoding_));
  }

  void SetAnswerEncoding(WireEncoding encoding) override {
    absl::MutexLock lock(&mu_);
    answer_encoding_ = encoding;
  }

 private:
  void Read() {
    ShmRing& in = channel_.in();
    absl::Status why;
    for (;;) {
      absl::StatusOr<ShmRing::Message> m = in.Read();
      // The worker closed its side (what it left unread there is not applied) or went away.
      if (!m.ok() || in.closed()) break;
      why = handler_.Handle(TotalBytes(m->bytes()), batch_.Parse(m->bytes()), batch_, this);
      batch_.Clear();
      in.Release();
      if (!why.ok()) break;
      absl::MutexLock lock(&mu_);
      if (queue_.queued_bytes() > kMaxQueuedAnswerBytes) {
        mu_.Await(absl::Condition(
            +[](ShmPushSession* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
              return s->ended_ || s->queue_.queued_bytes() <= kMaxQueuedAnswerBytes / 2;
            },
            this));
      }
      if (ended_) break;
    }
    End(why);
    in.Close();  // a worker waiting for room in it stops waiting
    // Only now, with no push of this session's in the core any more: the core sends nothing
    // here once Detach returns (until then Send drops what comes, the session having ended).
    core_->Detach(this);
    absl::MutexLock lock(&mu_);
    read_done_ = true;
  }

  void Write() {
    RingBatchWriter writer;
    std::vector<OutgoingPart> batch;
    absl::Status why;
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](ShmPushSession* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
              return s->ended_ || !s->queue_.empty();
            },
            this));
        if (ended_) {
          why = why_;
          break;
        }
        queue_.Pop(&batch);
      }
      const absl::Status written = writer.Write(channel_.out(), batch);
      if (written.ok()) {
        if (ShardMetrics* m = core_->metrics()) {
          m->sent_bytes.Increment(static_cast<double>(writer.last_bytes()));
        }
        continue;
      }
      // Gone or closed: nobody to tell. Anything else (an answer too large for the ring, say)
      // the worker hears as the stream's end.
      if (!absl::IsCancelled(written) && !absl::IsUnavailable(written)) {
        why = absl::Status(written.code(),
                           absl::StrCat("shard: answering ", handler_.peer(), ": ",
                                        written.message()));
      }
      End(why);
      channel_.in().Close();  // the reader stops
      break;
    }
    if (!why.ok()) (void)WriteStreamEnd(channel_.out(), why);
    channel_.out().Close();
    absl::MutexLock lock(&mu_);
    write_done_ = true;
  }

  // No more pushes are read or answers sent (answers the core still sends are dropped).
  void End(const absl::Status& why) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    why_ = why;
    queue_.Clear();
  }

  ShardCore* const core_;
  ShmChannel channel_;
  PushHandler handler_;  // the reader's (its peer() anyone's)
  ReceivedBatch batch_;  // the reader's

  absl::Mutex mu_;
  PartWriteQueue queue_ ABSL_GUARDED_BY(mu_);
  WireEncoding answer_encoding_ ABSL_GUARDED_BY(mu_) = WireEncoding::kF32;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status why_ ABSL_GUARDED_BY(mu_);  // a refused push: the stream's last message
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_done_ ABSL_GUARDED_BY(mu_) = false;

  std::thread reading_, writing_;  // last: they start once the rest is built
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShmSessionServer>> StartShmPushServer(ShardCore* core,
                                                                     const std::string& name,
                                                                     size_t ring_bytes) {
  return ShmSessionServer::Start(
      name, ring_bytes, /*pool_bytes=*/0, "a worker", "that worker pushes over gRPC",
      [core](ShmChannel channel) -> std::unique_ptr<ShmSession> {
        return std::make_unique<ShmPushSession>(core, std::move(channel));
      });
}

}  // namespace cohort
