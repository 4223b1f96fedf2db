#include "services/shard/replication/backup_link.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_write_queue.h"

namespace cohort {
namespace {

// Smaller buffers come as cheaply from malloc.
constexpr size_t kRecycledBytes = 64 << 10;

}  // namespace

StreamBackupLink::StreamBackupLink(std::unique_ptr<BackupStream> stream, std::string leader,
                                     std::string backup, std::ostream* err)
    : stream_(std::move(stream)),
      leader_(std::move(leader)),
      backup_(std::move(backup)),
      err_(err) {
  reader_ = std::thread([this] { ReadLoop(); });
  writer_ = std::thread([this] { WriteLoop(); });
}

StreamBackupLink::~StreamBackupLink() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  stream_->Cancel();
  reader_.join();
  writer_.join();
}

void StreamBackupLink::Forward(const LeaderUpdate& update, std::function<void()> done) {
  Queued q{update.id, update.version, update.lr, update.rank, update.pushed_on};
  q.done = std::move(done);
  UpdateBuffer* buffer = update.buffer;
  const bool pooled = buffer != nullptr && buffer->pool_offset() >= 0;
  if (pooled && buffer->pool() == stream_->pool()) {
    q.shared = std::move(*buffer);
  } else if (buffer != nullptr && !pooled) {
    q.values.swap(buffer->heap());
  } else {
    q.values.assign(reinterpret_cast<const char*>(update.values.data()),
                    update.values.size() * sizeof(float));
    // A stretch of an earlier stream's pool (the part's backup changed): copied, let go.
    if (pooled) *buffer = UpdateBuffer();
  }
  if (const PartCopy* copy = update.copy) {
    q.copy = std::make_unique<v1::LeaderUpdate>();
    v1::LeaderUpdate& m = *q.copy;
    m.set_copy(true);
    m.set_share(copy->share);
    for (const auto& [name, tensor] : copy->optimizer.tensors) {
      (*m.mutable_optimizer())[name].assign(reinterpret_cast<const char*>(tensor.data()),
                                            tensor.size() * sizeof(float));
    }
    m.set_optimizer_updates(copy->optimizer.updates);
    for (int64_t v : copy->pushed_on_by_rank) m.add_pushed_on_by_rank(v);
    for (const std::vector<float>& push : copy->latest_pushes) {
      m.add_latest_pushes(reinterpret_cast<const char*>(push.data()), push.size() * sizeof(float));
    }
  }
  absl::MutexLock lock(&mu_);
  // The backup may have come back into the job: the first copy carries the job's settings.
  if (update.copy != nullptr && !config_sent_) {
    q.config = std::make_unique<v1::InitMessage::Config>(ToProto(*update.copy->config));
    config_sent_ = true;
  }
  to_send_.push_back(std::move(q));
}

void StreamBackupLink::Fill(Queued& q, v1::LeaderUpdate& m) {
  if (q.copy != nullptr) m.Swap(q.copy.get());
  m.set_key(q.id.key);
  m.set_part(q.id.part);
  m.set_version(q.version);
  m.set_lr(q.lr);
  m.set_rank(q.rank);
  m.set_pushed_on(q.pushed_on);
  if (q.shared.pool_offset() >= 0) {
    m.set_pool_offset(q.shared.pool_offset());
    m.set_pool_value_bytes(static_cast<int64_t>(q.shared.size()));
  } else {
    m.mutable_values()->swap(q.values);
  }
}

UpdateBuffer StreamBackupLink::Spare(size_t bytes) {
  if (std::optional<UpdateBuffer> shared = stream_->Share(bytes)) return *std::move(shared);
  std::string spare;
  if (bytes > kRecycledBytes) {
    absl::MutexLock lock(&mu_);
    auto it = spares_.lower_bound(bytes);
    if (it != spares_.end()) {
      spare = std::move(it->second);
      spares_.erase(it);
    }
  }
  spare.resize(bytes);
  return UpdateBuffer::FromHeap(std::move(spare));
}

bool StreamBackupLink::broken() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

void StreamBackupLink::ReadLoop() {
  v1::BackupAck ack;
  std::vector<Sent> acknowledged;
  while (stream_->Read(&ack)) {
    {
      absl::MutexLock lock(&mu_);
      for (int64_t i = 0; i < ack.applied() && !sent_.empty(); ++i) {
        acknowledged.push_back(std::move(sent_.front()));
        sent_.pop_front();
      }
    }
    // Outside the lock: a done takes its part's lock, under which Forward takes this one.
    for (Sent& sent : acknowledged) sent.done();
    acknowledged.clear();  // the shared stretches go back
  }
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    reading_ = false;
  }
  GiveUpSent();
}

void StreamBackupLink::WriteLoop() {
  bool finished = false;  // the stream's status is known
  v1::LeaderUpdateBatch batch;  // its messages kept from one batch to the next
  while (true) {
    batch.Clear();
    std::vector<std::function<void()>> given_up;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !to_send_.empty() || (!reading_ && !finished) || (closing_ && finished);
      };
      mu_.Await(absl::Condition(&ready));
      if (!reading_ && !finished) {
        finish = finished = true;
      } else if (to_send_.empty()) {
        return;  // closing, and nothing is left to give up
      }
      // The updates waiting go together, up to the data path's fusion size; once the stream
      // failed, each is given up instead.
      for (size_t bytes = 0;
           !finish && !to_send_.empty() && bytes < static_cast<size_t>(kDefaultFusionBytes);
           to_send_.pop_front()) {
        Queued& q = to_send_.front();
        bytes += q.values.size();
        if (broken_) {
          given_up.push_back(std::move(q.done));
        } else {
          Fill(q, *batch.add_updates());
          if (q.config != nullptr) batch.mutable_config()->Swap(q.config.get());
          sent_.push_back({std::move(q.done), std::move(q.shared)});
        }
      }
    }
    if (finish) Say(stream_->Finish());  // the reader saw the stream end: no write in flight
    for (std::function<void()>& done : given_up) done();
    if (batch.updates_size() == 0) continue;
    stream_->Write(batch);  // a failure ends the reader's too
    absl::MutexLock lock(&mu_);
    for (v1::LeaderUpdate& u : *batch.mutable_updates()) {
      std::string* values = u.mutable_values();
      if (values->capacity() > kRecycledBytes) {
        spares_.emplace(values->capacity(), std::move(*values));
      }
    }
  }
}

void StreamBackupLink::Say(const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
  }
  if (absl::IsCancelled(why)) return;  // the backup left the job
  *err_ << absl::StrCat(leader_, ": its backup, ", backup_, ", is gone (",
                        why.ok() ? "it closed the stream" : why.message(),
                        "): the parts it leads go on without a backup\n");
}

void StreamBackupLink::GiveUpSent() {
  std::deque<Sent> given_up;
  {
    absl::MutexLock lock(&mu_);
    given_up.swap(sent_);
  }
  for (Sent& sent : given_up) sent.done();
}

}  // namespace cohort
