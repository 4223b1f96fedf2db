#include "services/shard/shard_service.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/base/status_macros.h"
#include "services/common/count_text.h"
#include "services/common/grpc_util.h"
#include "services/common/log_safe.h"
#include "services/shard/push_handler.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_codec.h"
#include "services/wire/part_write_queue.h"

namespace cohort {
namespace {

// How long a Back waits for its copies to be held.
constexpr absl::Duration kCopyWait = absl::Minutes(1);

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

grpc::Status ShardService::Init(grpc::ServerContext*, grpc::ServerReader<v1::InitMessage>* reader,
                                v1::InitReply* reply) {
  if (grpc::Status set_up = WaitForSetUp("init"); !set_up.ok()) return set_up;
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
    if (absl::Status s = core_->AddPart(part->id, value, message.part_set(), !message.backup());
        !s.ok()) {
      return ToGrpcStatus(s);
    }
    if (!message.backup()) led.push_back(part->id);
    absl::MutexLock lock(&link_mu_);
    shares_[message.part_set()].insert(part->id);
  }
  if (!core_->ready()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "shard init ended before every announced part arrived");
  }
  if (!config->backup_address.empty()) {
    if (make_link_ == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "shard init: the job replicates its shards, but this shard was started "
                          "without a way to reach its backup");
    }
    absl::MutexLock lock(&link_mu_);
    links_.push_back(make_link_(config->backup_address));
    for (PartId id : led) {
      if (absl::Status s = core_->SetBackup(id, links_.back().get()); !s.ok()) {
        return ToGrpcStatus(s);
      }
    }
    std::cerr << absl::StrCat("shard ", core_->rank(), ": its backup at ",
                              LogSafe(config->backup_address, 128), " keeps the ",
                              Count(led.size(), "part"), " it leads; it backs up ",
                              Count(config->num_parts - led.size(), "part"),
                              " of another shard\n");
  }
  reply->set_step(core_->start_step());
  reply->set_resumed(core_->resumed());
  return grpc::Status::OK;
}

grpc::Status ShardService::Replicate(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::ReplicaAck, v1::ReplicaBatch>* stream) {
  if (absl::Status open = OpenReplicas(); !open.ok()) return ToGrpcStatus(open);
  {
    absl::MutexLock lock(&link_mu_);
    if (leaving_) return grpc::Status::CANCELLED;
    replicating_.insert(context);
  }
  const auto served = absl::MakeCleanup([this, context] {
    absl::MutexLock lock(&link_mu_);
    replicating_.erase(context);
  });
  const std::string from = LogSafe(context->peer(), 128);
  v1::ReplicaBatch batch;
  v1::ReplicaAck ack;
  std::vector<absl::Span<const char>> values;
  while (stream->Read(&batch)) {
    values.clear();
    for (const v1::ReplicaUpdate& u : batch.updates()) {
      values.emplace_back(u.values().data(), u.values().size());
    }
    if (absl::Status taken = TakeReplicas(batch, values, from); !taken.ok()) {
      return ToGrpcStatus(taken);
    }
    ack.set_applied(batch.updates_size());
    if (!stream->Write(ack)) break;
  }
  return grpc::Status::OK;
}

absl::Status ShardService::OpenReplicas() {
  if (grpc::Status set_up = WaitForSetUp("replicate"); !set_up.ok()) {
    return FromGrpcStatus(set_up);
  }
  absl::MutexLock lock(&link_mu_);
  if (leaving_) return absl::CancelledError("the shard left the job");
  return absl::OkStatus();
}

absl::Status ShardService::TakeReplicas(const v1::ReplicaBatch& batch,
                                        absl::Span<const absl::Span<const char>> values,
                                        absl::string_view from) {
  absl::Status taken = batch.has_config() ? ConfigureFromCopy(batch.config()) : absl::OkStatus();
  if (values.size() != static_cast<size_t>(batch.updates_size())) {
    taken = absl::InvalidArgumentError(absl::StrCat("a batch of ", batch.updates_size(),
                                                    " updates came with ", values.size(),
                                                    " values"));
  }
  for (int i = 0; taken.ok() && i < batch.updates_size(); ++i) {
    taken = TakeReplica(batch.updates(i), values[i]);
  }
  if (!taken.ok()) {
    std::cerr << absl::StrCat(taken.message(), " (from ", from,
                              "); the leader's parts go on without this backup\n");
  }
  return taken;
}

namespace {

// Floats from a message's bytes, read in place: protobuf's string is aligned for any scalar
// (it comes from operator new), and so are a ring's values (shm_replica_link.h).
absl::StatusOr<absl::Span<const float>> FloatsOf(absl::Span<const char> bytes,
                                                 const v1::ReplicaUpdate& u) {
  if (bytes.size() % sizeof(float) != 0 ||
      reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("replica of key ", u.key(), " part ",
                                                   u.part(), ": ", bytes.size(),
                                                   " bytes are no F32 values"));
  }
  return absl::Span<const float>(reinterpret_cast<const float*>(bytes.data()),
                                 bytes.size() / sizeof(float));
}

absl::StatusOr<absl::Span<const float>> FloatsOf(const std::string& bytes,
                                                 const v1::ReplicaUpdate& u) {
  return FloatsOf(absl::MakeConstSpan(bytes), u);
}

}  // namespace

absl::Status ShardService::TakeReplica(const v1::ReplicaUpdate& u,
                                       absl::Span<const char> bytes) {
  ASSIGN_OR_RETURN(const absl::Span<const float> values, FloatsOf(bytes, u));
  ReplicaUpdate update{{u.key(), u.part()}, u.version(), u.lr(), values, u.rank(), u.pushed_on()};
  if (!u.copy()) return core_->ApplyReplica(update);
  PartCopy copy;
  copy.share = u.part_set();
  for (const auto& [name, bytes] : u.optimizer()) {
    ASSIGN_OR_RETURN(const absl::Span<const float> tensor, FloatsOf(bytes, u));
    copy.optimizer.tensors[name].assign(tensor.begin(), tensor.end());
  }
  copy.optimizer.updates = u.optimizer_updates();
  copy.pushed_on_by_rank.assign(u.pushed_on_by_rank().begin(), u.pushed_on_by_rank().end());
  for (const std::string& bytes : u.latest_pushes()) {
    ASSIGN_OR_RETURN(const absl::Span<const float> push, FloatsOf(bytes, u));
    copy.latest_pushes.emplace_back(push.begin(), push.end());
  }
  update.copy = &copy;
  RETURN_IF_ERROR(core_->ApplyReplica(update));
  absl::MutexLock lock(&link_mu_);
  shares_[copy.share].insert(update.id);
  return absl::OkStatus();
}

absl::Status ShardService::ConfigureFromCopy(const v1::InitMessage::Config& message) {
  absl::StatusOr<ShardConfig> config = FromProto(message);
  if (!config.ok()) return config.status();
  // Copies from two leaders may come at once: the first configures.
  absl::MutexLock lock(&link_mu_);
  if (core_->config().has_value()) return absl::OkStatus();
  config->num_parts = 0;  // the copies add them
  config->backup_address.clear();
  return core_->Configure(*config);
}

grpc::Status ShardService::Back(grpc::ServerContext*, const v1::BackRequest* request,
                                v1::BackReply* reply) {
  if (grpc::Status set_up = WaitForSetUp("back"); !set_up.ok()) return set_up;
  const std::string who = absl::StrCat("shard ", request->rank(), " at ",
                                       LogSafe(request->address(), 128));
  if (make_link_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("shard ", core_->rank(), " was started without a way to "
                                     "reach a backup; ", who, " cannot back it up"));
  }
  std::vector<PartId> parts;
  ReplicaLink* link = nullptr;
  {
    absl::MutexLock lock(&link_mu_);
    if (leaving_) return grpc::Status::CANCELLED;
    auto it = shares_.find(request->part_set());
    if (it == shares_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("shard ", core_->rank(), " holds no part of share ",
                                       request->part_set(), ", which ", who, " was to back up"));
    }
    parts.assign(it->second.begin(), it->second.end());
    // Links to backups that died go, with what they hold (a shard serves a Back at every
    // comeback of another: they would pile up).
    for (auto l = links_.begin(); l != links_.end();) {
      if (!(*l)->broken()) {
        ++l;
        continue;
      }
      core_->DropBackupLink(l->get());
      l = links_.erase(l);
    }
    links_.push_back(make_link_(request->address()));
    link = links_.back().get();
  }
  const absl::Time start = absl::Now();
  auto copied = std::make_shared<absl::Notification>();
  if (absl::Status s = core_->AddBackup(parts, request->part_set(), link,
                                        [copied] { copied->Notify(); });
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!copied->WaitForNotificationWithTimeout(kCopyWait)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrCat("shard ", core_->rank(), ": the copy of share ",
                                     request->part_set(), " to ", who, " was not held within ",
                                     absl::FormatDuration(kCopyWait)));
  }
  if (link->broken()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("shard ", core_->rank(), ": the copy of share ",
                                     request->part_set(), " did not reach ", who,
                                     " (see this shard's log)"));
  }
  std::cerr << absl::StrFormat("shard %d: %s backs up share %d (%s) from now on, copied in %.0f ms\n",
                               core_->rank(), who, request->part_set(), Count(parts.size(), "part"),
                               absl::ToDoubleMilliseconds(absl::Now() - start));
  reply->set_parts(static_cast<int>(parts.size()));
  return grpc::Status::OK;
}

int ShardService::PartsOfShare(int share) const {
  absl::MutexLock lock(&link_mu_);
  auto it = shares_.find(share);
  return it == shares_.end() ? 0 : static_cast<int>(it->second.size());
}

void ShardService::CloseReplication() {
  std::vector<std::unique_ptr<ReplicaLink>> links;
  {
    absl::MutexLock lock(&link_mu_);
    links.swap(links_);
    leaving_ = true;
    for (grpc::ServerContext* context : replicating_) context->TryCancel();
  }
  // The parts stop forwarding before the links go: no update reaches them afterwards.
  core_->DropBackups();
}

grpc::Status ShardService::WaitForSetUp(absl::string_view call) const {
  if (set_up_ == nullptr) return grpc::Status::OK;
  // In slices: a shard that leaves before it is set up lets its callers go at once.
  const absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (!set_up_->WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    {
      absl::MutexLock lock(&link_mu_);
      if (leaving_) return grpc::Status(grpc::StatusCode::CANCELLED, "the shard left the job");
    }
    if (absl::Now() > deadline) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("shard ", call, ": the shard has not finished loading its "
                                       "checkpoint in 5 minutes (see its log)"));
    }
  }
  return grpc::Status::OK;
}

ShardService::ShardService(ShardCore* core, absl::Notification* set_up, ShardRollback* rollback,
                           ReplicaLinkFactory make_link)
    : core_(core),
      set_up_(set_up),
      no_checkpoints_(rollback != nullptr ? nullptr
                                          : std::make_unique<ShardRollback>(
                                                core, /*checkpoint_dir=*/"",
                                                /*writes_checkpoints=*/false, &std::cout,
                                                &std::cerr)),
      rollback_(rollback != nullptr ? rollback : no_checkpoints_.get()),
      make_link_(std::move(make_link)) {}

grpc::Status ShardService::RollBack(grpc::ServerContext*, const v1::RollBackRequest* request,
                                    v1::RollBackReply*) {
  if (grpc::Status set_up = WaitForSetUp("roll back"); !set_up.ok()) return set_up;
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
  if (grpc::Status set_up = WaitForSetUp("list checkpoints"); !set_up.ok()) return set_up;
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
