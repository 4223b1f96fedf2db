#include "services/shard/shard_service.h"

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "services/common/grpc_util.h"
#include "services/common/log_safe.h"
#include "services/shard/push_handler.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_codec.h"
#include "services/wire/part_write_queue.h"

namespace cohort {
namespace {

// One worker's PushPull stream. Reads a message of parts, hands them to the core (PushHandler),
// reads the next; answers (which the core sends from whichever stream's thread completed an
// update) queue here and go out one write at a time, in model order, small ones fused
// (PartWriteQueue), in the encoding the worker pushes in (AnswerEncoding). The stream's rank is
// the first push's; it cannot change.
class PushPullReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                              public PushStream {
 public:
  PushPullReactor(ShardCore* core, std::string peer) : core_(core), handler_(core, peer) {
    // Read before taking mu_: the core's locks come before a stream's (Push sends under them).
    if (const std::optional<ShardConfig> config = core->config()) {
      absl::MutexLock lock(&mu_);
      queue_.set_fusion_bytes(config->fusion_bytes);
    }
    StartRead(&in_);
  }

  void Send(PartId id, int64_t version, absl::Span<const float> value, PinCount* pin) override {
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      queue_.Push(AnswerPart(id, version, value, pin, answer_encoding_));
      if (writing_) return;
      writing_ = true;
      queue_.Pop(&batch_);
    }
    WriteBatch();
  }

  void SetAnswerEncoding(WireEncoding encoding) override {
    absl::MutexLock lock(&mu_);
    answer_encoding_ = encoding;
  }

  void OnReadDone(bool ok) override {
    absl::Status status;
    if (ok) {
      const size_t bytes = in_.Length();
      status = handler_.Handle(bytes, batch_in_.Parse(&in_), batch_in_, this);
    }
    batch_in_.Clear();  // gives the receive buffers back before the next read
    {
      absl::MutexLock lock(&mu_);
      // A failed write may have closed the stream meanwhile: no read after that.
      reading_ = ok && status.ok() && !closing_;
      if (!reading_) {
        if (final_status_.ok()) final_status_ = status;
        Close();
        return;
      }
      // A worker that reads its answers slower than it pushes: its next push waits (and
      // gRPC's flow control holds its writes) until the answers have drained.
      if (queue_.queued_bytes() > kMaxQueuedAnswerBytes) {
        reading_ = false;
        paused_ = true;
        return;
      }
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    bool read = false, write = false;
    current_.Clear();
    {
      absl::MutexLock lock(&mu_);
      if (!ok) Close();  // the worker is gone
      if (paused_ && !closing_ && queue_.queued_bytes() <= kMaxQueuedAnswerBytes / 2) {
        paused_ = false;
        reading_ = read = true;
      }
      if (closing_ || queue_.empty()) {
        writing_ = false;
        MaybeFinish();
      } else {
        queue_.Pop(&batch_);
        write = true;
      }
    }
    if (read) StartRead(&in_);
    if (write) WriteBatch();
  }

  void OnDone() override {
    core_->Detach(this);  // after this, the core sends nothing more here
    delete this;
  }

 private:
  // No more reads or answers; queued answers are dropped (releasing their pins).
  void Close() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    closing_ = true;
    queue_.Clear();
    MaybeFinish();
  }

  // The write in flight (writing_): its message is built outside the lock (it may copy and
  // encode a fusion's worth of values); only this write's owner touches batch_ and current_.
  void WriteBatch() {
    current_ = SerializeBatch(batch_);
    if (ShardMetrics* m = core_->metrics()) m->sent_bytes.Increment(current_.Length());
    StartWrite(&current_);
  }

  // Finishes once closing, with no read or write in flight.
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!closing_ || reading_ || writing_ || finished_) return;
    finished_ = true;
    Finish(ToGrpcStatus(final_status_));
  }

  ShardCore* const core_;
  PushHandler handler_;  // the reading side's
  grpc::ByteBuffer in_;
  ReceivedBatch batch_in_;
  // The write in flight: its parts, then its message (the writer's alone; see WriteBatch).
  std::vector<OutgoingPart> batch_;
  grpc::ByteBuffer current_;

  absl::Mutex mu_;
  PartWriteQueue queue_ ABSL_GUARDED_BY(mu_);
  WireEncoding answer_encoding_ ABSL_GUARDED_BY(mu_) = WireEncoding::kF32;
  bool reading_ ABSL_GUARDED_BY(mu_) = true;  // the constructor starts the first read
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // no more reads; answer nothing more
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;  // no read: too many answers queued
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

ShardService::ShardService(ShardCore* core, const ShardSetUp* set_up, ShardRollback* rollback,
                           ShardReplication* replication)
    : core_(core),
      set_up_already_(set_up != nullptr ? nullptr : std::make_unique<ShardSetUp>()),
      no_checkpoints_(rollback != nullptr ? nullptr
                                          : std::make_unique<ShardRollback>(
                                                core, /*checkpoint_dir=*/"",
                                                /*writes_checkpoints=*/false, &std::cout,
                                                &std::cerr)),
      no_link_(replication != nullptr
                   ? nullptr
                   : std::make_unique<ShardReplication>(
                         core, set_up != nullptr ? set_up : set_up_already_.get(),
                         /*make_link=*/nullptr, &std::cerr)),
      set_up_(set_up != nullptr ? set_up : set_up_already_.get()),
      rollback_(rollback != nullptr ? rollback : no_checkpoints_.get()),
      replication_(replication != nullptr ? replication : no_link_.get()) {
  if (set_up_already_ != nullptr) set_up_already_->Done();
}

grpc::Status ShardService::Init(grpc::ServerContext*, grpc::ServerReader<v1::InitMessage>* reader,
                                v1::InitReply* reply) {
  if (absl::Status s = set_up_->Wait("init"); !s.ok()) return ToGrpcStatus(s);
  v1::InitMessage message;
  if (!reader->Read(&message) || !message.has_config()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "shard init: the first message must carry the config");
  }
  absl::StatusOr<ShardConfig> config = FromProto(message.config());
  if (!config.ok()) return ToGrpcStatus(config.status());
  if (absl::Status s = core_->Configure(*config); !s.ok()) return ToGrpcStatus(s);
  std::vector<float> value;
  std::vector<PartId> led;  // the parts this shard leads (not another's, backed up here)
  while (reader->Read(&message)) {
    absl::StatusOr<PartHeader> part = DecodePart(message.part(), &value);
    if (!part.ok()) return ToGrpcStatus(part.status());
    if (absl::Status s = core_->AddPart(part->id, value, message.share(), !message.backup());
        !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (!message.backup()) led.push_back(part->id);
    replication_->Holds(message.share(), part->id);
  }
  if (!core_->ready()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "shard init ended before every announced part arrived");
  }
  if (absl::Status s = replication_->LinkLedParts(config->backup_address, led, config->num_parts);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  reply->set_step(core_->start_step());
  reply->set_resumed(core_->resumed());
  return grpc::Status::OK;
}

grpc::Status ShardService::Replicate(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::BackupAck, v1::LeaderUpdateBatch>* stream) {
  absl::StatusOr<std::unique_ptr<ShardReplication::ServedStream>> served =
      replication_->ServeStream([context] { context->TryCancel(); });
  if (!served.ok()) return ToGrpcStatus(served.status());
  const std::string from = LogSafe(context->peer(), 128);
  v1::LeaderUpdateBatch batch;
  v1::BackupAck ack;
  std::vector<absl::Span<const char>> values;
  while (stream->Read(&batch)) {
    values.clear();
    for (const v1::LeaderUpdate& u : batch.updates()) {
      values.emplace_back(u.values().data(), u.values().size());
    }
    if (absl::Status taken = replication_->TakeUpdates(batch, values, from); !taken.ok()) {
      return ToGrpcStatus(taken);
    }
    ack.set_applied(batch.updates_size());
    if (!stream->Write(ack)) break;
  }
  return grpc::Status::OK;
}

grpc::Status ShardService::CopyShare(grpc::ServerContext*, const v1::CopyShareRequest* request,
                                     v1::CopyShareReply* reply) {
  absl::StatusOr<int> parts =
      replication_->CopyShareTo(request->share(), request->rank(), request->address());
  if (!parts.ok()) return ToGrpcStatus(parts.status());
  reply->set_parts(*parts);
  return grpc::Status::OK;
}

grpc::Status ShardService::RollBack(grpc::ServerContext*, const v1::RollBackRequest* request,
                                    v1::RollBackReply*) {
  if (absl::Status s = set_up_->Wait("roll back"); !s.ok()) return ToGrpcStatus(s);
  // Refused first: a shard without checkpoints has nothing to go on from, whatever is asked.
  if (absl::Status s = rollback_->KeepsCheckpoints(); !s.ok()) return ToGrpcStatus(s);
  std::optional<Regeneration> next;
  if (request->has_next()) {
    absl::StatusOr<ShardConfig> config = FromProto(request->next());
    if (!config.ok()) return ToGrpcStatus(config.status());
    next = Regeneration{*std::move(config), request->next_step()};
  }
  return ToGrpcStatus(rollback_->RollBack(request->step(), next));
}

grpc::Status ShardService::ListCheckpoints(grpc::ServerContext*,
                                           const v1::ListCheckpointsRequest*,
                                           v1::ListCheckpointsReply* reply) {
  if (absl::Status s = set_up_->Wait("list checkpoints"); !s.ok()) return ToGrpcStatus(s);
  const ShardCheckpoints held = rollback_->Checkpoints();
  reply->set_configured(held.configured);
  reply->set_num_workers(held.num_workers);
  reply->set_steps_per_epoch(held.steps_per_epoch);
  for (int64_t step : held.steps) reply->add_steps(step);
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ShardService::PushPull(
    grpc::CallbackServerContext* context) {
  return new PushPullReactor(core_, context->peer());
}

grpc::Status ShardService::Pull(grpc::ServerContext*, const v1::PullRequest* request,
                                grpc::ServerWriter<v1::Part>* writer) {
  std::vector<float> value;
  v1::Part message;
  for (const v1::PullRequest::PartId& p : request->parts()) {
    const PartId id{p.key(), p.part()};
    absl::StatusOr<int64_t> version = core_->Read(id, &value);
    if (!version.ok()) return ToGrpcStatus(version.status());
    EncodePart(id, *version, /*rank=*/-1, value, &message);
    if (!writer->Write(message)) break;
  }
  return grpc::Status::OK;
}

}  // namespace cohort
