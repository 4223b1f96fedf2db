#include "services/worker/dist_kvstore.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/shard.grpc.pb.h"
#include "services/common/grpc_util.h"
#include "services/common/optimizer_config.h"
#include "services/common/part_codec.h"
#include "trainer/base/status_macros.h"
#include "trainer/kvstore/partition.h"

namespace cohort {
namespace {

using PushPullStream = grpc::ClientReaderWriter<v1::Part, v1::Part>;

// Parameters live on the shards as parts (trainer/kvstore/partition.h). A push sends every part
// of a key on its shard's stream; the shard answers each with the part's new value on the same
// stream, which a reader thread per stream copies into the key's receive buffer. A pull of a
// pushed key waits for those answers; a pull of a key not pushed since its last pull asks the
// shards for the current values. Push and Pull are called from one thread (KVStore's contract).
class DistKVStoreImpl final : public KVStore {
 public:
  DistKVStoreImpl(std::string type, std::unique_ptr<MemberSession> owned, MemberSession* session,
                  int64_t part_bytes)
      : type_(std::move(type)),
        owned_session_(std::move(owned)),
        session_(session),
        part_bytes_(part_bytes) {
    session_->OnEnd([this] {
      absl::MutexLock lock(&mu_);
      job_ended_ = true;
    });
  }

  ~DistKVStoreImpl() override {
    for (Stream& s : streams_) s.context->TryCancel();
    for (Stream& s : streams_) {
      if (s.reader.joinable()) s.reader.join();
    }
    if (owned_session_ != nullptr) owned_session_->Leave(absl::OkStatus());
  }

  absl::Status Connect() {
    ASSIGN_OR_RETURN(shard_addresses_, session_->WaitForCluster());
    for (const std::string& address : shard_addresses_) {
      shard_stubs_.push_back(v1::Shard::NewStub(MakeChannel(address)));
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
    Key k;
    k.shape = value.shape();
    k.initial.assign(value.data<float>(), value.data<float>() + value.numel());
    keys_.push_back(std::move(k));
    return absl::OkStatus();
  }

  absl::Status Push(int64_t key, const Tensor& grad) override {
    RETURN_IF_ERROR(Commit());
    ASSIGN_OR_RETURN(Key * k, Find(key, grad, "push"));
    {
      absl::MutexLock lock(&mu_);
      if (k->awaiting > 0 || k->pushed) {
        return absl::FailedPreconditionError(
            absl::StrCat("kvstore push of key ", key, " twice without a pull in between"));
      }
      k->awaiting = static_cast<int>(map_.key_parts[key].size());
      k->pushed = true;
    }
    const absl::Span<const float> values = grad.span<float>();
    for (int index : map_.key_parts[key]) {
      const Part& p = map_.parts[index];
      EncodePart({key, p.index}, k->version, rank(), values.subspan(p.offset, p.elements),
                 &message_);
      if (!streams_[p.shard].stream->Write(message_)) {
        return StreamError(p.shard, "could not send a push");
      }
    }
    return absl::OkStatus();
  }

  absl::Status Pull(int64_t key, Tensor* out) override {
    RETURN_IF_ERROR(Commit());
    ASSIGN_OR_RETURN(Key * k, Find(key, *out, "pull"));
    if (!k->pushed) return PullCurrent(key, out);
    absl::MutexLock lock(&mu_);
    const auto answered = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return k->awaiting == 0 || job_ended_ || !stream_error_.ok();
    };
    mu_.Await(absl::Condition(&answered));
    if (k->awaiting > 0) return Interrupted();
    std::memcpy(out->raw(), k->received.data(), k->received.size() * sizeof(float));
    k->pushed = false;
    ++k->version;
    return absl::OkStatus();
  }

  absl::Status Barrier() override {
    RETURN_IF_ERROR(Commit());
    return session_->Barrier(absl::StrCat("user barrier ", ++barriers_), 0).status();
  }

 private:
  struct Key {
    Shape shape;
    std::vector<float> initial;   // until committed
    std::vector<float> received;  // the pushed step's answers
    int64_t version = 0;          // updates the shards applied to this key
    bool pushed = false;          // pushed since the last pull
    int awaiting = 0;             // parts not answered yet (guarded by mu_)
  };
  struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<PushPullStream> stream;
    std::thread reader;
  };

  absl::StatusOr<Key*> Find(int64_t key, const Tensor& t, absl::string_view what) {
    if (key < 0 || key >= static_cast<int64_t>(keys_.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore ", what, " of key ", key, " before its init"));
    }
    Key& k = keys_[key];
    if (t.shape() != k.shape || t.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("kvstore ", what, " of key ", key, ": ",
                                                     DTypeName(t.dtype()), " ", t.shape().ToString(),
                                                     ", the key holds F32 ", k.shape.ToString()));
    }
    return &k;
  }

  // Why a wait ended early: the job ended or a shard stream broke.
  absl::Status Interrupted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!stream_error_.ok()) return stream_error_;
    absl::Status end = session_->end_status();
    if (!end.ok()) return end;
    return absl::AbortedError("the job ended while this worker waited for the shards");
  }

  absl::Status StreamError(int shard, absl::string_view what) {
    absl::MutexLock lock(&mu_);
    if (stream_error_.ok()) {
      stream_error_ = absl::UnavailableError(absl::StrCat(
          "worker ", rank(), ": ", what, " to shard ", shard, " at ", shard_addresses_[shard]));
    }
    return stream_error_;
  }

  // On the first push or pull: every rank computes the partition map; rank 0 sends each shard
  // its parts' initial values and the update rule; a barrier checks that every rank computed
  // the same map and that the shards are ready; then the streams open.
  absl::Status Commit() {
    if (committed_) return absl::OkStatus();
    committed_ = true;
    if (keys_.empty()) return absl::FailedPreconditionError("kvstore used before any init");
    std::vector<TensorSize> sizes;
    for (const Key& k : keys_) sizes.push_back({k.shape.numel(), 4});
    ASSIGN_OR_RETURN(map_, PartitionParameters(sizes, static_cast<int>(shard_stubs_.size()),
                                               part_bytes_));
    fingerprint_ = map_.Fingerprint();
    if (rank() == 0) RETURN_IF_ERROR(InitShards());
    for (Key& k : keys_) {
      k.received.resize(k.initial.size());
      std::vector<float>().swap(k.initial);
    }
    RETURN_IF_ERROR(session_->Barrier("kvstore init", fingerprint_).status());
    for (size_t s = 0; s < shard_stubs_.size(); ++s) {
      Stream stream;
      stream.context = std::make_unique<grpc::ClientContext>();
      stream.stream = shard_stubs_[s]->PushPull(stream.context.get());
      streams_.push_back(std::move(stream));
    }
    for (size_t s = 0; s < streams_.size(); ++s) {
      streams_[s].reader = std::thread([this, s] { ReadAnswers(static_cast<int>(s)); });
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
        const std::vector<float>& initial = keys_[p.key].initial;
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

  // The reader thread of shard s's stream.
  void ReadAnswers(int s) {
    Stream& stream = streams_[s];
    v1::Part answer;
    std::vector<float> values;
    while (stream.stream->Read(&answer)) {
      absl::StatusOr<DecodedPart> d = DecodePart(answer, &values);
      absl::MutexLock lock(&mu_);
      if (!d.ok()) {
        if (stream_error_.ok()) stream_error_ = d.status();
        return;
      }
      if (d->id.key < 0 || d->id.key >= static_cast<int64_t>(keys_.size()) ||
          d->id.part >= static_cast<int>(map_.key_parts[d->id.key].size())) {
        stream_error_ = absl::InternalError(absl::StrCat(
            "shard ", s, " answered with key ", d->id.key, " part ", d->id.part,
            ", which this worker does not have"));
        return;
      }
      Key& k = keys_[d->id.key];
      const Part& p = map_.parts[map_.key_parts[d->id.key][d->id.part]];
      std::memcpy(k.received.data() + p.offset, values.data(), values.size() * sizeof(float));
      --k.awaiting;
    }
    const grpc::Status status = stream.stream->Finish();
    absl::MutexLock lock(&mu_);
    if (stream_error_.ok() && !job_ended_) {
      stream_error_ = absl::UnavailableError(absl::StrCat(
          "worker ", rank(), ": the stream to shard ", s, " at ", shard_addresses_[s],
          " ended: ", status.ok() ? "closed by the shard" : status.error_message(),
          status.error_code() == grpc::StatusCode::UNAVAILABLE ? " (did the shard die?)" : ""));
    }
  }

  const std::string type_;
  const std::unique_ptr<MemberSession> owned_session_;
  MemberSession* const session_;
  const int64_t part_bytes_;
  std::vector<std::string> shard_addresses_;
  std::vector<std::unique_ptr<v1::Shard::Stub>> shard_stubs_;
  OptimizerSpec optimizer_;
  bool has_optimizer_ = false;
  bool committed_ = false;
  PartitionMap map_;  // fixed once committed
  uint64_t fingerprint_ = 0;
  std::vector<Key> keys_;
  std::vector<Stream> streams_;
  v1::Part message_;  // reused for every push
  int64_t barriers_ = 0;

  absl::Mutex mu_;  // guards Key::awaiting/received, the job and stream state below
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status stream_error_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<KVStore>> MakeDist(absl::string_view type,
                                                  std::unique_ptr<MemberSession> owned,
                                                  MemberSession* session, int64_t part_bytes) {
  if (type != "dist_sync" && type != "dist_async") {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_store=", type, ": expected local, dist_sync or dist_async"));
  }
  if (type != session->mode()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_store=", type, ", but job ",
                                                   session->job_id(), " runs ", session->mode(),
                                                   " (the scheduler's --mode)"));
  }
  if (part_bytes < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--part_bytes=", part_bytes, ": must be at least 4 (one float)"));
  }
  auto kv = std::make_unique<DistKVStoreImpl>(std::string(type), std::move(owned), session,
                                              part_bytes);
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
  return o;
}

absl::StatusOr<std::unique_ptr<KVStore>> CreateDistKVStore(absl::string_view type,
                                                           MemberSession* session,
                                                           int64_t part_bytes) {
  return MakeDist(type, nullptr, session, part_bytes);
}

namespace kvstore {

absl::StatusOr<std::unique_ptr<KVStore>> Create(absl::string_view type, const JobOptions& options) {
  if (type == "local") return CreateKVStore(type);
  ASSIGN_OR_RETURN(std::unique_ptr<MemberSession> session,
                   MemberSession::Join(options.SessionOptions()));
  MemberSession* raw = session.get();
  return MakeDist(type, std::move(session), raw, options.part_bytes);
}

}  // namespace kvstore
}  // namespace cohort
