#include "services/worker/dist_kvstore.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/client_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/shard.grpc.pb.h"
#include "services/common/grpc_util.h"
#include "services/wire/config_proto.h"
#include "services/wire/part_codec.h"
#include "services/wire/part_write_queue.h"
#include "trainer/base/random.h"
#include "trainer/base/status_macros.h"
#include "trainer/kvstore/partition.h"

namespace cohort {
namespace {

constexpr char kPushPullMethod[] = "/cohort.v1.Shard/PushPull";

// Where a shard stream's answers and end go.
class AnswerReceiver {
 public:
  virtual ~AnswerReceiver() = default;
  virtual void OnAnswer(int shard, const ReceivedPart& part) = 0;
  virtual void OnStreamEnd(int shard, const grpc::Status& status) = 0;
};

// A worker's PushPull stream to one shard (the bulk path). Parts queue here and go out one
// write at a time, in model order (PartWriteQueue); answers are parsed in place and handed to
// the receiver on gRPC's thread.
class ShardStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ShardStream(int shard, grpc::GenericStub* stub, AnswerReceiver* receiver)
      : shard_(shard), receiver_(receiver) {
    stub->PrepareBidiStreamingCall(&context_, kPushPullMethod, grpc::StubOptions(), this);
    AddHold();  // writes start from the caller's thread: the call stays until Close
    StartRead(&in_);
    StartCall();
  }

  void Send(PartId id, grpc::ByteBuffer message) {
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;  // the stream's end is (or will be) reported; the message is dropped
      queue_.Push(id, std::move(message));
      if (writing_) return;
      writing_ = true;
      current_ = queue_.Pop();
    }
    StartWrite(&current_);
  }

  // Ends the call and waits until gRPC is done with it: no answer arrives after this, and
  // every message sent has been released.
  void Cancel() {
    context_.TryCancel();
    Close();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  void OnWriteDone(bool ok) override {
    bool release = false, next = false;
    {
      absl::MutexLock lock(&mu_);
      current_.Clear();
      if (!ok) queue_.Clear();  // the stream is broken: OnDone reports why
      if (closing_ || queue_.empty()) {
        writing_ = false;
        release = ReleaseHoldIfIdle();
      } else {
        current_ = queue_.Pop();
        next = true;
      }
    }
    if (release) RemoveHold();
    if (next) StartWrite(&current_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the call is ending: OnDone follows once the hold is gone
      Close();
      return;
    }
    const absl::Status parsed = part_.Parse(&in_);
    if (parsed.ok()) receiver_->OnAnswer(shard_, part_);
    part_.Clear();
    if (parsed.ok()) {
      StartRead(&in_);
      return;
    }
    failure_ = parsed;
    context_.TryCancel();
    Close();
  }

  void OnDone(const grpc::Status& status) override {
    receiver_->OnStreamEnd(shard_, failure_.ok() ? status : ToGrpcStatus(failure_));
    absl::MutexLock lock(&mu_);
    queue_.Clear();
    done_ = true;
  }

 private:
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

  const int shard_;
  AnswerReceiver* const receiver_;
  grpc::ClientContext context_;
  grpc::ByteBuffer in_;
  ReceivedPart part_;
  absl::Status failure_;  // an answer that could not be parsed

  absl::Mutex mu_;
  PartWriteQueue queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_ ABSL_GUARDED_BY(mu_);   // the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Parameters live on the shards as parts (trainer/kvstore/partition.h). PushPull sends every
// part of a key on its shard's stream, straight from the gradient's memory; the shard answers
// each part on the same stream, and its bytes are copied from the transport's buffers straight
// into the destination tensor. Wait returns once every part is in and gRPC has let go of the
// gradient. A pull of a key with nothing in flight asks the shards for the current values.
// Calls come from one thread (KVStore's contract); answers arrive on gRPC's threads.
class DistKVStoreImpl final : public KVStore, public AnswerReceiver {
 public:
  DistKVStoreImpl(std::string type, std::unique_ptr<MemberSession> owned, MemberSession* session,
                  const JobOptions& options)
      : type_(std::move(type)),
        owned_session_(std::move(owned)),
        session_(session),
        part_bytes_(options.part_bytes),
        delay_pushes_seed_(options.delay_pushes_seed) {
    session_->OnEnd([this] {
      absl::MutexLock lock(&mu_);
      job_ended_ = true;
    });
  }

  ~DistKVStoreImpl() override {
    StopStreams();
    if (owned_session_ != nullptr) owned_session_->Leave(absl::OkStatus());
  }

  absl::Status Connect() {
    ASSIGN_OR_RETURN(shard_addresses_, session_->WaitForCluster());
    for (const std::string& address : shard_addresses_) {
      channels_.push_back(MakeChannel(address));
      shard_stubs_.push_back(v1::Shard::NewStub(channels_.back()));
    }
    return absl::OkStatus();
  }

  absl::string_view type() const override { return type_; }
  int rank() const override { return session_->rank(); }
  int num_workers() const override { return session_->num_workers(); }

  absl::Status SetOptimizer(const OptimizerSpec& spec) override {
    RETURN_IF_ERROR(MakeOptimizer(spec.optimizer, spec.optimizer_options).status());
    RETURN_IF_ERROR(LrSchedule::Create(spec.lr_schedule).status());
    optimizer_ = spec;
    has_optimizer_ = true;
    return absl::OkStatus();
  }

  absl::Status Init(int64_t key, const Tensor& value) override {
    if (committed_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "kvstore init of key ", key, " after the first push or pull; init every key first"));
    }
    if (value.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("kvstore init of key ", key, ": ",
                                                     DTypeName(value.dtype()), ", not F32"));
    }
    if (key != static_cast<int64_t>(keys_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kvstore init of key ", key, ": the distributed kvstore takes keys 0, 1, 2... in order "
          "(next expected ", keys_.size(), ")"));
    }
    auto k = std::make_unique<Key>();
    k->shape = value.shape();
    k->initial.assign(value.data<float>(), value.data<float>() + value.numel());
    keys_.push_back(std::move(k));
    return absl::OkStatus();
  }

  absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out) override {
    RETURN_IF_ERROR(Commit());
    ASSIGN_OR_RETURN(Key * k, Find(key, grad, "push"));
    RETURN_IF_ERROR(Find(key, *out, "pull").status());
    return Start(key, k, grad, out->data<float>());
  }

  absl::Status Wait(int64_t key) override {
    RETURN_IF_ERROR(Commit());
    if (key < 0 || key >= static_cast<int64_t>(keys_.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore wait of key ", key, " before its init"));
    }
    Key& k = *keys_[key];
    if (!k.in_flight) return absl::OkStatus();
    {
      absl::MutexLock lock(&mu_);
      const auto answered = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return k.awaiting == 0 || job_ended_ || !stream_error_.ok();
      };
      mu_.Await(absl::Condition(&answered));
      if (k.awaiting == 0) k.in_flight = false;
    }
    if (k.in_flight) {
      // The caller may free its tensors once this returns: nothing may touch them any more.
      StopStreams();
      absl::MutexLock lock(&mu_);
      return Interrupted();
    }
    // Every answer is in, so the shard has read the whole push: gRPC lets go of the gradient's
    // memory at once, if it has not already.
    k.pins.WaitUnpinned();
    return absl::OkStatus();
  }

  absl::Status Push(int64_t key, const Tensor& grad) override {
    RETURN_IF_ERROR(Commit());
    ASSIGN_OR_RETURN(Key * k, Find(key, grad, "push"));
    if (k->in_flight) return InFlight(key);
    if (k->pushed_copy.shape() != grad.shape()) {  // allocated once per key
      k->pushed_copy = Tensor(grad.shape());
      k->pushed_result.resize(grad.numel());
    }
    std::memcpy(k->pushed_copy.raw(), grad.raw(), grad.numel() * sizeof(float));
    RETURN_IF_ERROR(Start(key, k, k->pushed_copy, k->pushed_result.data()));
    k->result_unread = true;
    return absl::OkStatus();
  }

  absl::Status Pull(int64_t key, Tensor* out) override {
    RETURN_IF_ERROR(Commit());
    ASSIGN_OR_RETURN(Key * k, Find(key, *out, "pull"));
    RETURN_IF_ERROR(Wait(key));
    if (!k->result_unread) return PullCurrent(key, out);
    std::memcpy(out->raw(), k->pushed_result.data(), k->pushed_result.size() * sizeof(float));
    k->result_unread = false;
    return absl::OkStatus();
  }

  absl::Status Barrier() override {
    RETURN_IF_ERROR(Commit());
    return session_->Barrier(absl::StrCat("user barrier ", ++barriers_), 0).status();
  }

  void OnAnswer(int shard, const ReceivedPart& answer) override {
    const DecodedPart& h = answer.header();
    float* destination = nullptr;
    const Part* part = nullptr;
    {
      absl::MutexLock lock(&mu_);
      const absl::Status valid = CheckAnswer(shard, answer, &part);
      if (!valid.ok()) {
        if (stream_error_.ok()) stream_error_ = valid;
        return;
      }
      destination = keys_[h.id.key]->destination + part->offset;
    }
    // Outside the lock: the part's destination is this answer's alone.
    CopyChunks(answer.chunks(), destination);
    absl::MutexLock lock(&mu_);
    Key& k = *keys_[h.id.key];
    k.versions[h.id.part] = h.version;
    --k.awaiting;
  }

  void OnStreamEnd(int shard, const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (closing_ || job_ended_ || !stream_error_.ok()) return;
    stream_error_ = absl::UnavailableError(absl::StrCat(
        "worker ", rank(), ": the stream to shard ", shard, " at ", shard_addresses_[shard],
        " ended: ", status.ok() ? "closed by the shard" : status.error_message(),
        status.error_code() == grpc::StatusCode::UNAVAILABLE ? " (did the shard die?)" : ""));
  }

 private:
  struct Key {
    Shape shape;
    std::vector<float> initial;        // until committed
    std::vector<int64_t> versions;     // by part index: the version of the value this worker has
    std::vector<int64_t> sent;         // by part index: the version the pushed gradient was on
    PinCount pins;                     // gRPC still reading the pushed gradient
    bool in_flight = false;            // between PushPull and Wait (written under mu_)
    float* destination = nullptr;      // where the answers go (guarded by mu_ while in flight)
    int awaiting = 0;                  // parts not answered yet (guarded by mu_)
    Tensor pushed_copy;                // what Push sends (the caller may reuse its gradient)
    std::vector<float> pushed_result;  // Push's answers, for the next Pull
    bool result_unread = false;
  };

  absl::StatusOr<Key*> Find(int64_t key, const Tensor& t, absl::string_view what) {
    if (key < 0 || key >= static_cast<int64_t>(keys_.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore ", what, " of key ", key, " before its init"));
    }
    Key& k = *keys_[key];
    if (t.shape() != k.shape || t.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("kvstore ", what, " of key ", key, ": ",
                                                     DTypeName(t.dtype()), " ", t.shape().ToString(),
                                                     ", the key holds F32 ", k.shape.ToString()));
    }
    return &k;
  }

  // Sends every part of the key's gradient; their answers will go to destination.
  absl::Status Start(int64_t key, Key* k, const Tensor& grad, float* destination) {
    if (k->in_flight) return InFlight(key);
    const std::vector<int>& parts = map_.key_parts[key];
    bool failed;
    {
      absl::MutexLock lock(&mu_);
      failed = closing_ || !stream_error_.ok() || job_ended_;
      if (!failed) {
        k->destination = destination;
        k->awaiting = static_cast<int>(parts.size());
        k->in_flight = true;
      }
    }
    if (failed) {  // other keys may be in flight: stop them before the caller gives up
      StopStreams();
      absl::MutexLock lock(&mu_);
      return Interrupted();
    }
    k->result_unread = false;
    const absl::Span<const float> values = grad.span<float>();
    for (int index : parts) {
      const Part& p = map_.parts[index];
      DelayPushForTests(key, p.index);
      k->sent[p.index] = k->versions[p.index];
      streams_[p.shard]->Send({key, p.index},
                              SerializePart({key, p.index}, k->sent[p.index], rank(),
                                            values.subspan(p.offset, p.elements), &k->pins));
    }
    return absl::OkStatus();
  }

  // Ends every stream and waits until gRPC has let go of every tensor it was given, so that
  // after a failed Wait, and before the store goes away, nothing writes into the caller's
  // tensors or reads them. A transport stuck on a dead link may hold on to sent bytes: after a
  // bounded wait the store says so and goes on.
  void StopStreams() {
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      closing_ = true;
    }
    for (auto& stream : streams_) stream->Cancel();
    for (size_t key = 0; key < keys_.size(); ++key) {
      if (!keys_[key]->pins.WaitUnpinnedFor(absl::Seconds(10))) {
        std::cerr << "worker " << rank() << ": gRPC still holds key " << key
                  << "'s pushed gradient 10 s after its streams ended\n";
      }
    }
  }

  static absl::Status InFlight(int64_t key) {
    return absl::FailedPreconditionError(
        absl::StrCat("kvstore push of key ", key, " while its last push is in flight; wait for "
                     "it (Wait or Pull) first"));
  }

  // With a seed, each part's push is held back a little on one rank picked at random per
  // (seed, version, key, part), so arrival orders at the shards differ from run to run.
  void DelayPushForTests(int64_t key, int part) {
    if (delay_pushes_seed_ == 0) return;
    const uint64_t h = MixKeys({delay_pushes_seed_,
                                static_cast<uint64_t>(keys_[key]->versions[part]),
                                static_cast<uint64_t>(key), static_cast<uint64_t>(part)});
    if (static_cast<int>(h % num_workers()) != rank()) return;
    absl::SleepFor(absl::Microseconds((h >> 16) % 3000));
  }

  // An answer must be a part of a key in flight, from the shard that holds it, of its size,
  // one version past the push (dist_sync) or later (dist_async).
  absl::Status CheckAnswer(int shard, const ReceivedPart& answer, const Part** part)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const DecodedPart& h = answer.header();
    const auto unexpected = [&](absl::string_view why) {
      return absl::InternalError(absl::StrCat("worker ", rank(), ": shard ", shard,
                                              " answered key ", h.id.key, " part ", h.id.part,
                                              " version ", h.version, ", but ", why));
    };
    if (h.id.key < 0 || h.id.key >= static_cast<int64_t>(keys_.size()) || h.id.part < 0 ||
        h.id.part >= static_cast<int>(map_.key_parts[h.id.key].size())) {
      return unexpected("this worker has no such part");
    }
    *part = &map_.parts[map_.key_parts[h.id.key][h.id.part]];
    const Key& k = *keys_[h.id.key];
    if ((*part)->shard != shard) return unexpected("another shard holds it");
    if (answer.bytes() != static_cast<size_t>((*part)->elements) * sizeof(float)) {
      return unexpected(absl::StrCat("it has ", (*part)->elements, " elements"));
    }
    if (!k.in_flight || k.awaiting == 0) return unexpected("this worker has not pushed it");
    const int64_t sent = k.sent[h.id.part];
    if (type_ == "dist_sync" ? h.version != sent + 1 : h.version <= sent) {
      return unexpected(absl::StrCat("the push was computed on version ", sent));
    }
    return absl::OkStatus();
  }

  // Why a wait ended early: the job ended or a shard stream broke.
  absl::Status Interrupted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!stream_error_.ok()) return stream_error_;
    absl::Status end = session_->end_status();
    if (!end.ok()) return end;
    return absl::AbortedError("the job ended while this worker waited for the shards");
  }

  // On the first push or pull: every rank computes the partition map; rank 0 sends each shard
  // its parts' initial values and the update rule; a barrier checks that every rank computed
  // the same map and that the shards are ready; then the streams open.
  absl::Status Commit() {
    if (committed_) return absl::OkStatus();
    committed_ = true;
    if (keys_.empty()) return absl::FailedPreconditionError("kvstore used before any init");
    std::vector<TensorSize> sizes;
    for (const auto& k : keys_) sizes.push_back({k->shape.numel(), 4});
    ASSIGN_OR_RETURN(map_, PartitionParameters(sizes, static_cast<int>(shard_stubs_.size()),
                                               part_bytes_));
    fingerprint_ = map_.Fingerprint();
    if (rank() == 0) RETURN_IF_ERROR(InitShards());
    for (size_t key = 0; key < keys_.size(); ++key) {
      Key& k = *keys_[key];
      k.versions.assign(map_.key_parts[key].size(), 0);
      k.sent.assign(map_.key_parts[key].size(), 0);
      std::vector<float>().swap(k.initial);
    }
    RETURN_IF_ERROR(session_->Barrier("kvstore init", fingerprint_).status());
    for (size_t s = 0; s < channels_.size(); ++s) {
      generic_stubs_.push_back(std::make_unique<grpc::GenericStub>(channels_[s]));
    }
    for (size_t s = 0; s < channels_.size(); ++s) {
      streams_.push_back(
          std::make_unique<ShardStream>(static_cast<int>(s), generic_stubs_[s].get(), this));
    }
    return absl::OkStatus();
  }

  absl::Status InitShards() {
    if (!has_optimizer_) {
      return absl::FailedPreconditionError("kvstore: rank 0 must call SetOptimizer before Init");
    }
    for (size_t s = 0; s < shard_stubs_.size(); ++s) {
      grpc::ClientContext context;
      v1::InitReply reply;
      auto writer = shard_stubs_[s]->Init(&context, &reply);
      v1::InitMessage message;
      v1::InitMessage::Config* c = message.mutable_config();
      c->set_num_workers(num_workers());
      c->set_mode(type_);
      c->set_partition_fingerprint(fingerprint_);
      int parts = 0;
      for (const Part& p : map_.parts) parts += p.shard == static_cast<int>(s);
      c->set_num_parts(parts);
      *c->mutable_optimizer() = ToProto(optimizer_);
      bool ok = writer->Write(message);
      message.clear_config();
      for (const Part& p : map_.parts) {
        if (!ok || p.shard != static_cast<int>(s)) continue;
        const std::vector<float>& initial = keys_[p.key]->initial;
        EncodePart({p.key, p.index}, 0, rank(),
                   absl::MakeConstSpan(initial).subspan(p.offset, p.elements),
                   message.mutable_part());
        ok = writer->Write(message);
      }
      writer->WritesDone();
      const grpc::Status status = writer->Finish();
      if (!status.ok()) {
        return absl::Status(FromGrpcStatus(status).code(),
                            absl::StrCat("worker 0: initialising shard ", s, " at ",
                                         shard_addresses_[s], ": ", status.error_message()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status PullCurrent(int64_t key, Tensor* out) {
    float* dst = out->data<float>();
    Key& k = *keys_[key];
    for (int index : map_.key_parts[key]) {
      const Part& p = map_.parts[index];
      v1::PullRequest request;
      v1::PullRequest::PartId* id = request.add_parts();
      id->set_key(key);
      id->set_part(p.index);
      grpc::ClientContext context;
      auto reader = shard_stubs_[p.shard]->Pull(&context, request);
      v1::Part answer;
      std::vector<float> values;
      bool got = false;
      while (reader->Read(&answer)) {
        ASSIGN_OR_RETURN(DecodedPart d, DecodePart(answer, &values));
        if (!(d.id == PartId{key, p.index}) || static_cast<int64_t>(values.size()) != p.elements) {
          return absl::InternalError(absl::StrCat("shard ", p.shard, " answered a pull of key ",
                                                  key, " part ", p.index, " with another part"));
        }
        std::memcpy(dst + p.offset, values.data(), values.size() * sizeof(float));
        k.versions[p.index] = d.version;
        got = true;
      }
      const grpc::Status status = reader->Finish();
      if (!status.ok() || !got) {
        return absl::UnavailableError(absl::StrCat("worker ", rank(), ": pull of key ", key,
                                                   " part ", p.index, " from shard ", p.shard,
                                                   " at ", shard_addresses_[p.shard], ": ",
                                                   status.error_message()));
      }
    }
    return absl::OkStatus();
  }

  const std::string type_;
  const std::unique_ptr<MemberSession> owned_session_;
  MemberSession* const session_;
  const int64_t part_bytes_;
  const uint64_t delay_pushes_seed_;
  std::vector<std::string> shard_addresses_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Shard::Stub>> shard_stubs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_stubs_;
  OptimizerSpec optimizer_;
  bool has_optimizer_ = false;
  bool committed_ = false;
  PartitionMap map_;  // fixed once committed
  uint64_t fingerprint_ = 0;
  std::vector<std::unique_ptr<Key>> keys_;  // stable addresses: answers and pins refer to them
  std::vector<std::unique_ptr<ShardStream>> streams_;
  int64_t barriers_ = 0;

  absl::Mutex mu_;  // guards the Key fields marked so, and the job and stream state below
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stream_error_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<KVStore>> MakeDist(absl::string_view type,
                                                  std::unique_ptr<MemberSession> owned,
                                                  MemberSession* session,
                                                  const JobOptions& options) {
  if (type != "dist_sync" && type != "dist_async") {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_store=", type, ": expected local, dist_sync or dist_async"));
  }
  if (type != session->mode()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_store=", type, ", but job ",
                                                   session->job_id(), " runs ", session->mode(),
                                                   " (the scheduler's --mode)"));
  }
  if (options.part_bytes < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--part_bytes=", options.part_bytes, ": must be at least 4 (one float)"));
  }
  auto kv = std::make_unique<DistKVStoreImpl>(std::string(type), std::move(owned), session,
                                              options);
  RETURN_IF_ERROR(kv->Connect());
  return std::unique_ptr<KVStore>(std::move(kv));
}

}  // namespace

MemberSessionOptions JobOptions::SessionOptions() const {
  MemberSessionOptions o;
  o.scheduler_address = scheduler_address;
  o.role = v1::WORKER;
  o.requested_rank = requested_rank;
  o.connect_timeout = connect_timeout;
  o.scheduler_grace = scheduler_grace;
  return o;
}

absl::StatusOr<JobOptions> JobOptionsFromEnvironment() {
  JobOptions o;
  const char* scheduler = std::getenv("COHORT_SCHEDULER");
  if (scheduler == nullptr || *scheduler == '\0') {
    return absl::InvalidArgumentError(
        "COHORT_SCHEDULER is not set: start this program with the launcher "
        "(bazel run //tools:launch -- -n W -s S -- PROGRAM) or pass the scheduler's address");
  }
  o.scheduler_address = scheduler;
  if (const char* rank = std::getenv("COHORT_RANK"); rank != nullptr && *rank != '\0') {
    if (!absl::SimpleAtoi(rank, &o.requested_rank)) {
      return absl::InvalidArgumentError(absl::StrCat("COHORT_RANK='", rank, "' is not a number"));
    }
  }
  if (const char* bytes = std::getenv("COHORT_PART_BYTES"); bytes != nullptr && *bytes != '\0') {
    if (!absl::SimpleAtoi(bytes, &o.part_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("COHORT_PART_BYTES='", bytes, "' is not a number"));
    }
  }
  if (const char* bind = std::getenv("COHORT_METRICS_BIND"); bind != nullptr && *bind != '\0') {
    o.metrics_bind = bind;
  }
  if (const char* path = std::getenv("COHORT_METRICS_PORT_FILE"); path != nullptr) {
    o.metrics_port_file = path;
  }
  return o;
}

absl::StatusOr<std::unique_ptr<KVStore>> CreateDistKVStore(absl::string_view type,
                                                           MemberSession* session,
                                                           const JobOptions& options) {
  return MakeDist(type, nullptr, session, options);
}

namespace kvstore {

absl::StatusOr<std::unique_ptr<KVStore>> Create(absl::string_view type, const JobOptions& options) {
  if (type == "local") return CreateKVStore(type);
  ASSIGN_OR_RETURN(std::unique_ptr<MemberSession> session,
                   MemberSession::Join(options.SessionOptions()));
  MemberSession* raw = session.get();
  return MakeDist(type, std::move(session), raw, options);
}

}  // namespace kvstore
}  // namespace cohort
