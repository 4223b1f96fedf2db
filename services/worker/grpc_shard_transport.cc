#include "services/worker/grpc_shard_transport.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/client_callback.h>

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/shard.grpc.pb.h"
#include "services/common/deadline_timer.h"
#include "services/common/grpc_util.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_codec.h"
#include "services/worker/bulk_stream.h"
#include "services/worker/shm_shard_stream.h"

namespace cohort {
namespace {

constexpr char kPushPullMethod[] = "/cohort.v1.Shard/PushPull";

// The stream over gRPC: a PushPull call.
class ShardStream final : public BulkStream,
                          public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ShardStream(int shard, grpc::GenericStub* stub, AnswerReceiver* receiver, int64_t fusion_bytes,
              absl::Duration fusion_wait, DeadlineTimer* timer)
      : BulkStream(shard, receiver, fusion_bytes, fusion_wait, timer) {
    stub->PrepareBidiStreamingCall(&context_, kPushPullMethod, grpc::StubOptions(), this);
    AddHold();  // writes start from the caller's thread: the call stays until Close
    StartRead(&in_);
    StartCall();
  }

  void Cancel() override {
    context_.TryCancel();
    Close();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void OnWriteDone(bool ok) override {
    bool release = false, next = false;
    current_.Clear();
    {
      absl::MutexLock lock(&mu_);
      if (!ok) queue_.Clear();  // the stream is broken: OnDone reports why
      if (closing_ || queue_.empty()) {
        writing_ = false;
        release = ReleaseHoldIfIdle();
      } else {
        queue_.Pop(&batch_);
        next = true;
      }
    }
    if (release) RemoveHold();
    if (next) WriteBatch();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the call is ending: OnDone follows once the hold is gone
      Close();
      return;
    }
    const absl::Status parsed = batch_in_.Parse(&in_);
    if (parsed.ok()) Deliver(batch_in_);
    batch_in_.Clear();
    if (parsed.ok()) {
      StartRead(&in_);
      return;
    }
    failure_ = parsed;
    context_.TryCancel();
    Close();
  }

  void OnDone(const grpc::Status& status) override {
    receiver_->OnStreamEnd(shard_, failure_.ok() ? FromGrpcStatus(status) : failure_);
    absl::MutexLock lock(&mu_);
    queue_.Clear();
    done_ = true;
  }

 private:
  // The write in flight (writing_): its message is built outside the lock (it may copy and
  // encode a fusion's worth of values); only this write's owner touches batch_ and current_.
  void WriteBatch() override {
    current_ = SerializeBatch(batch_);
    StartWrite(&current_);
  }

  // No more writes; the call may end once none is in flight.
  void Close() {
    bool release;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      queue_.Clear();
      release = ReleaseHoldIfIdle();
    }
    if (release) RemoveHold();
  }

  bool ReleaseHoldIfIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!closing_ || writing_ || hold_released_) return false;
    hold_released_ = true;
    return true;
  }

  grpc::ClientContext context_;
  grpc::ByteBuffer in_;
  absl::Status failure_;  // an answer that could not be parsed
  grpc::ByteBuffer current_;  // the write in flight's message (the writer's alone)
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class GrpcShardTransport final : public ShardTransport {
 public:
  GrpcShardTransport(std::vector<std::string> addresses,
                     std::shared_ptr<const TransportSecurity> security, int64_t fusion_bytes,
                     absl::Duration fusion_wait, bool shared_memory)
      : security_(std::move(security)),
        fusion_bytes_(fusion_bytes),
        fusion_wait_(fusion_wait),
        shared_memory_(shared_memory) {
    Dial(std::move(addresses));
  }
  ~GrpcShardTransport() override { Close(); }

  int num_shards() const override { return static_cast<int>(addresses_.size()); }
  std::string shard_address(int shard) const override { return addresses_[shard]; }

  absl::StatusOr<int64_t> InitShard(int shard, const ShardConfig& config,
                                    absl::Span<const InitialPart> parts) override {
    grpc::ClientContext context;
    v1::InitReply reply;
    auto writer = stubs_[shard]->Init(&context, &reply);
    v1::InitMessage message;
    *message.mutable_config() = ToProto(config);
    bool ok = writer->Write(message);
    message.clear_config();
    for (const InitialPart& p : parts) {
      if (!ok) break;
      EncodePart(p.id, /*version=*/0, /*rank=*/0, p.value, message.mutable_part());
      message.set_backup(p.backup);
      message.set_share(p.share);
      ok = writer->Write(message);
    }
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (status.ok()) return reply.resumed() ? reply.step() : -1;
    return absl::Status(FromGrpcStatus(status).code(),
                        absl::StrCat("worker 0: initialising shard ", shard, " at ",
                                     addresses_[shard], ": ", status.error_message()));
  }

  absl::Status RollBack(int shard, int64_t step,
                        const std::optional<Regeneration>& next) override {
    grpc::ClientContext context;
    v1::RollBackRequest request;
    request.set_step(step);
    if (next.has_value()) {
      *request.mutable_next() = ToProto(next->config);
      request.set_next_step(next->step);
    }
    v1::RollBackReply reply;
    const grpc::Status status = stubs_[shard]->RollBack(&context, request, &reply);
    if (status.ok()) return absl::OkStatus();
    return absl::Status(FromGrpcStatus(status).code(),
                        absl::StrCat("worker 0: rolling shard ", shard, " at ", addresses_[shard],
                                     " back to step ", step, ": ", status.error_message()));
  }

  absl::StatusOr<ShardCheckpoints> ListCheckpoints(int shard) override {
    grpc::ClientContext context;
    v1::ListCheckpointsReply reply;
    const grpc::Status status =
        stubs_[shard]->ListCheckpoints(&context, v1::ListCheckpointsRequest(), &reply);
    if (!status.ok()) {
      return absl::Status(FromGrpcStatus(status).code(),
                          absl::StrCat("asking shard ", shard, " at ", addresses_[shard],
                                       " for its checkpoints: ", status.error_message()));
    }
    return ShardCheckpoints{{reply.steps().begin(), reply.steps().end()},
                            reply.configured(),
                            reply.num_workers(),
                            reply.steps_per_epoch()};
  }

  void Redial(std::vector<std::string> addresses) override {
    Close();
    {
      absl::MutexLock lock(&streams_mu_);
      streams_.clear();
    }
    generic_stubs_.clear();
    // The same shards (an elastic job's workers changed): their channels stay.
    if (addresses != addresses_) Dial(std::move(addresses));
  }

  void Open(AnswerReceiver* receiver) override {
    absl::MutexLock lock(&streams_mu_);
    generic_stubs_.resize(num_shards());
    for (int s = 0; s < num_shards(); ++s) streams_.push_back(OpenStream(s, receiver));
  }

  void Reopen(int shard, const std::string& address, AnswerReceiver* receiver) override
      ABSL_NO_THREAD_SAFETY_ANALYSIS {  // streams_ changes only on this thread, as in Send
    streams_[shard]->Cancel();
    addresses_[shard] = address;
    channels_[shard] = MakeChannel(address, *security_);
    stubs_[shard] = v1::Shard::NewStub(channels_[shard]);
    std::unique_ptr<BulkStream> stream = OpenStream(shard, receiver);
    absl::MutexLock lock(&streams_mu_);
    streams_[shard] = std::move(stream);
  }

  // The caller's thread; streams_ changes only on it (Open, Redial), so it reads it unlocked.
  void Send(int shard, const OutgoingPart& part) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    streams_[shard]->Send(part);
  }

  void Flush() override {
    absl::MutexLock lock(&streams_mu_);
    for (auto& stream : streams_) stream->Flush();
  }

  // The caller's thread, as Send. Not under streams_mu_: the timer's Flush may hold it while a
  // ring's writer waits for room, which cancelling the stream ends.
  void Close() override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (auto& stream : streams_) stream->Cancel();
  }

  absl::StatusOr<PartHeader> Pull(int shard, PartId id, std::vector<float>* out) override {
    v1::PullRequest request;
    v1::PullRequest::PartId* wanted = request.add_parts();
    wanted->set_key(id.key);
    wanted->set_part(id.part);
    grpc::ClientContext context;
    auto reader = stubs_[shard]->Pull(&context, request);
    v1::Part answer;
    absl::StatusOr<PartHeader> got = absl::UnavailableError("the shard answered nothing");
    while (reader->Read(&answer)) got = DecodePart(answer, out);
    const grpc::Status status = reader->Finish();
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return got;
  }

 private:
  // Shard s's stream: over its ring where it shares this host (shared memory), else gRPC.
  std::unique_ptr<BulkStream> OpenStream(int s, AnswerReceiver* receiver) {
    std::optional<ShmChannel> local =
        shared_memory_ ? DialSameHost(s, addresses_[s]) : std::nullopt;
    if (local.has_value()) {
      return MakeShmShardStream(s, *std::move(local), receiver, fusion_bytes_, fusion_wait_,
                                &flush_timer_);
    }
    generic_stubs_[s] = std::make_unique<grpc::GenericStub>(channels_[s]);
    return std::make_unique<ShardStream>(s, generic_stubs_[s].get(), receiver, fusion_bytes_,
                                         fusion_wait_, &flush_timer_);
  }

  void Dial(std::vector<std::string> addresses) {
    addresses_ = std::move(addresses);
    channels_.clear();
    stubs_.clear();
    for (const std::string& address : addresses_) {
      channels_.push_back(MakeChannel(address, *security_));
      stubs_.push_back(v1::Shard::NewStub(channels_.back()));
    }
  }

  std::vector<std::string> addresses_;
  const std::shared_ptr<const TransportSecurity> security_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Shard::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_stubs_;  // by shard (null: a ring)
  const int64_t fusion_bytes_;
  const absl::Duration fusion_wait_;
  const bool shared_memory_;
  // The open streams: the caller's thread changes them; the timer's thread flushes them.
  absl::Mutex streams_mu_;
  std::vector<std::unique_ptr<BulkStream>> streams_ ABSL_GUARDED_BY(streams_mu_);
  // Last: destroyed (its thread stopped) before the streams it flushes.
  DeadlineTimer flush_timer_{[this] { Flush(); }};
};

}  // namespace

std::unique_ptr<ShardTransport> MakeGrpcShardTransport(
    std::vector<std::string> shard_addresses, std::shared_ptr<const TransportSecurity> security,
    int64_t fusion_bytes, absl::Duration fusion_wait, bool shared_memory) {
  return std::make_unique<GrpcShardTransport>(std::move(shard_addresses), std::move(security),
                                              fusion_bytes, fusion_wait, shared_memory);
}

}  // namespace cohort
