#include "services/shard/replication/shm_backup_link.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/wire/byte_chunks.h"
#include "services/wire/ring_stream.h"

namespace cohort {
namespace {

constexpr size_t kLengthBytes = 4;  // the batch message's, before it

size_t PaddedTo4(size_t n) { return (n + 3) & ~size_t{3}; }

// n bytes at `offset` of a message, read where they lie unless they straddle the ring's end
// (then gathered into scratch, which only one stretch of a message can need).
absl::Span<const char> BytesAt(const ShmRing::Message& m, size_t offset, size_t n,
                               std::string* scratch) {
  const absl::Span<const char> first = m.chunks[0];
  if (offset + n <= first.size()) return first.subspan(offset, n);
  if (offset >= first.size()) return m.chunks[1].subspan(offset - first.size(), n);
  const size_t head = first.size() - offset;
  scratch->resize(n);
  std::memcpy(scratch->data(), first.data() + offset, head);
  std::memcpy(scratch->data() + head, m.chunks[1].data(), n - head);
  return absl::MakeConstSpan(*scratch);
}

// One leader's stream at its backup: a thread takes each batch where it lies in the ring and
// acknowledges it on the other ring.
class ShmBackupSession final : public ShmSession {
 public:
  ShmBackupSession(BackupIntake* receiver, ShmChannel channel)
      : receiver_(receiver),
        channel_(std::move(channel)),
        from_(absl::StrCat("shard pid ", channel_.peer_pid(), " on this host")),
        serving_([this] { Serve(); }) {}

  // Ends the stream, cancelled (the shard leaves the job), unless it ended already.
  ~ShmBackupSession() override {
    leaving_.store(true);
    channel_.in().Close();   // wakes the reading
    channel_.out().Close();  // and a write, should the leader have stopped reading
    serving_.join();
  }

  bool finished() override { return finished_.load(); }

 private:
  void Serve() {
    ShmRing& in = channel_.in();
    absl::Status why = receiver_->OpenIntake();
    v1::BackupAck ack;
    while (why.ok()) {
      absl::StatusOr<ShmRing::Message> m = in.Read();
      // The leader closed its side or went away: nobody to tell.
      if (!m.ok() || in.closed()) break;
      why = Take(*m);
      in.Release();
      if (!why.ok()) break;
      ack.set_applied(batch_.updates_size());
      ack.SerializeToString(&ack_);
      const absl::Span<const char> piece(ack_);
      if (!channel_.out().Write({&piece, 1}).ok()) break;
    }
    if (leaving_.load()) why = absl::CancelledError("the backup left the job");
    if (!why.ok()) (void)WriteStreamEnd(channel_.out(), why);
    channel_.out().Close();
    in.Close();  // a leader waiting for room stops waiting
    finished_.store(true);
  }

  // One batch from the ring into the receiver.
  absl::Status Take(const ShmRing::Message& m) {
    const size_t total = TotalBytes(m.bytes());
    uint32_t length = 0;
    if (total >= kLengthBytes) {
      std::memcpy(&length, BytesAt(m, 0, kLengthBytes, &scratch_).data(), kLengthBytes);
    }
    if (total < kLengthBytes || length > total - kLengthBytes ||
        !batch_.ParseFromArray(BytesAt(m, kLengthBytes, length, &scratch_).data(),
                               static_cast<int>(length))) {
      return Damaged(absl::StrCat("its message of ", total, " bytes holds no batch"));
    }
    values_.clear();
    size_t offset = PaddedTo4(kLengthBytes + length);
    const ShmRegion* pool = channel_.pool().get();
    for (const v1::LeaderUpdate& u : batch_.updates()) {
      if (u.has_pool_offset()) {
        const uint64_t at = static_cast<uint64_t>(u.pool_offset());
        const uint64_t n = static_cast<uint64_t>(u.pool_value_bytes());
        if (pool == nullptr || at % sizeof(float) != 0 || n % sizeof(float) != 0 ||
            at > pool->size() || n > pool->size() - at) {
          return Damaged(absl::StrCat("the update of key ", u.key(), " part ", u.part(),
                                      " names ", u.pool_value_bytes(), " bytes at byte ",
                                      u.pool_offset(), " of a pool of ",
                                      pool == nullptr ? 0 : pool->size()));
        }
        values_.emplace_back(pool->data() + at, n);
        continue;
      }
      const uint64_t n = static_cast<uint64_t>(u.ring_value_bytes());
      if (n % sizeof(float) != 0 || offset > total || n > total - offset) {
        return Damaged(absl::StrCat("the update of key ", u.key(), " part ", u.part(), " names ",
                                    u.ring_value_bytes(), " bytes at byte ", offset, " of ",
                                    total));
      }
      values_.push_back(BytesAt(m, offset, n, &scratch_));
      offset += n;
    }
    return receiver_->TakeUpdates(batch_, values_, from_);
  }

  absl::Status Damaged(const std::string& what) {
    const absl::Status damaged = absl::DataLossError(
        absl::StrCat("a batch of updates from ", from_, " is damaged: ", what));
    std::cerr << damaged.message() << "; the leader's parts go on without this backup\n";
    return damaged;
  }

  BackupIntake* const receiver_;
  ShmChannel channel_;
  const std::string from_;
  std::atomic<bool> leaving_{false};
  std::atomic<bool> finished_{false};
  // The serving thread's.
  v1::LeaderUpdateBatch batch_;
  std::vector<absl::Span<const char>> values_;
  std::string scratch_, ack_;
  std::thread serving_;  // last: starts once the rest is built
};

// Stretches start 64-byte aligned: whole cache lines, and the floats' alignment.
size_t PaddedTo64(size_t n) { return (n + 63) & ~size_t{63}; }

}  // namespace

SharedUpdatePool::SharedUpdatePool(std::shared_ptr<ShmRegion> region)
    : region_(std::move(region)) {}

std::optional<UpdateBuffer> SharedUpdatePool::Take(size_t bytes) {
  const size_t padded = PaddedTo64(std::max<size_t>(bytes, 1));
  const size_t size = region_->size();
  size_t at;
  {
    absl::MutexLock lock(&mu_);
    if (taken_.empty()) {
      next_ = 0;
      if (padded > size) return std::nullopt;
      at = 0;
    } else {
      // What is taken runs from the oldest stretch to next_, around the end where it wrapped.
      const size_t oldest = taken_.front().offset;
      if (next_ > oldest) {
        if (padded <= size - next_) {
          at = next_;
        } else if (padded <= oldest) {
          at = 0;
        } else {
          return std::nullopt;
        }
      } else if (next_ < oldest && padded <= oldest - next_) {
        at = next_;
      } else {
        return std::nullopt;  // next_ == oldest: full
      }
    }
    taken_.push_back({at, false});
    next_ = at + padded;
  }
  return UpdateBuffer(shared_from_this(), static_cast<int64_t>(at),
                      absl::MakeSpan(region_->data() + at, bytes));
}

void SharedUpdatePool::GiveBack(int64_t offset) {
  absl::MutexLock lock(&mu_);
  for (Stretch& s : taken_) {
    if (s.offset == static_cast<size_t>(offset) && !s.free) {
      s.free = true;
      break;
    }
  }
  while (!taken_.empty() && taken_.front().free) taken_.pop_front();
}

ShmBackupStream::ShmBackupStream(ShmChannel channel)
    : channel_(std::move(channel)),
      pool_(channel_.pool() != nullptr ? std::make_shared<SharedUpdatePool>(channel_.pool())
                                       : nullptr) {}

std::optional<UpdateBuffer> ShmBackupStream::Share(size_t bytes) {
  if (pool_ == nullptr) return std::nullopt;
  return pool_->Take(bytes);
}

bool ShmBackupStream::Write(v1::LeaderUpdateBatch& batch) {
  values_.resize(batch.updates_size());
  for (int i = 0; i < batch.updates_size(); ++i) {
    v1::LeaderUpdate& u = *batch.mutable_updates(i);
    values_[i].clear();
    // A pool's update has none (and asking for them would allocate an empty string).
    if (!u.values().empty()) values_[i].swap(*u.mutable_values());
    u.set_ring_value_bytes(static_cast<int64_t>(values_[i].size()));
  }
  message_.assign(kLengthBytes, '\0');
  batch.AppendToString(&message_);
  const uint32_t length = static_cast<uint32_t>(message_.size() - kLengthBytes);
  std::memcpy(message_.data(), &length, kLengthBytes);
  message_.resize(PaddedTo4(message_.size()), '\0');  // the values start 4-aligned
  pieces_.assign(1, absl::MakeConstSpan(message_));
  for (const std::string& v : values_) pieces_.emplace_back(v.data(), v.size());
  const absl::Status written = channel_.out().Write(pieces_);
  for (int i = 0; i < batch.updates_size(); ++i) {  // back, for reuse
    if (!values_[i].empty()) values_[i].swap(*batch.mutable_updates(i)->mutable_values());
  }
  if (written.ok()) return true;
  // Closed by the backup, or gone: the reader hears why. Anything else (a batch larger than
  // the ring) ends the stream here.
  if (!absl::IsCancelled(written) && !absl::IsUnavailable(written)) {
    End(written);
    Cancel();
  }
  return false;
}

bool ShmBackupStream::Read(v1::BackupAck* ack) {
  ShmRing& in = channel_.in();
  absl::StatusOr<ShmRing::Message> m = in.Read();
  if (!m.ok()) {
    // Closed without a last word: by this side, or by a backup leaving the job.
    End(absl::IsUnavailable(m.status()) ? absl::UnavailableError("its process ended")
                                        : absl::CancelledError("the backup closed the stream"));
    return false;
  }
  if (std::optional<absl::Status> end = StreamEnd(m->bytes())) {
    in.Release();
    End(*end);
    return false;
  }
  ack_.resize(TotalBytes(m->bytes()));
  CopyChunks(m->bytes(), ack_.data());
  in.Release();
  if (ack->ParseFromString(ack_)) return true;
  End(absl::DataLossError("its acknowledgement came damaged"));
  Cancel();
  return false;
}

absl::Status ShmBackupStream::Finish() {
  absl::MutexLock lock(&mu_);
  return why_;
}

void ShmBackupStream::Cancel() {
  channel_.in().Close();
  channel_.out().Close();
}

void ShmBackupStream::End(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  ended_ = true;
  why_ = why;
}

absl::StatusOr<std::unique_ptr<ShmBackupStream>> DialShmBackup(const std::string& address) {
  absl::StatusOr<ShmChannel> channel = DialShardOnThisHost(address, BackupRendezvousName);
  if (!channel.ok()) return channel.status();
  return std::make_unique<ShmBackupStream>(*std::move(channel));
}

absl::StatusOr<std::unique_ptr<ShmSessionServer>> StartShmBackupServer(BackupIntake* receiver,
                                                                        const std::string& name,
                                                                        size_t ring_bytes,
                                                                        size_t pool_bytes) {
  return ShmSessionServer::Start(
      name, ring_bytes, pool_bytes, "a leading shard", "it replicates to this shard over gRPC",
      [receiver](ShmChannel channel) -> std::unique_ptr<ShmSession> {
        return std::make_unique<ShmBackupSession>(receiver, std::move(channel));
      });
}

}  // namespace cohort
