#include "services/worker/dist_kvstore_core.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

absl::Status InFlight(int64_t key) {
  return absl::FailedPreconditionError(
      absl::StrCat("kvstore push of key ", key, " while its last push is in flight; wait for "
                   "it (Wait or Pull) first"));
}

}  // namespace

DistKVStoreCore::DistKVStoreCore(KVStoreMode mode, JobMembership* membership,
                                 std::unique_ptr<ShardTransport> transport, ShardsView shards,
                                 const DistKVStoreOptions& options)
    : mode_(mode),
      membership_(membership),
      transport_(std::move(transport)),
      options_(options),
      shards_(std::move(shards)),
      replicas_(shards_.replicas) {
  {
    absl::MutexLock lock(&mu_);
    generation_heard_ = shards_.generation;
  }
  end_listener_ = membership_->OnEnd([this] {
    absl::MutexLock lock(&mu_);
    job_ended_ = true;
  });
  generation_listener_ = membership_->OnGenerationChange([this](int64_t generation) {
    absl::MutexLock lock(&mu_);
    if (generation <= generation_heard_) return;
    generation_heard_ = generation;
    // A wait for answers that may never come (a dead worker's push) ends now.
    if (stream_error_.ok()) {
      stream_error_ = MembershipChangedError(
          generation, absl::StrCat(membership_->name(), " heard it from the scheduler"));
    }
  });
}

DistKVStoreCore::~DistKVStoreCore() {
  membership_->RemoveEndListener(generation_listener_);
  membership_->RemoveEndListener(end_listener_);
  StopStreams();
}

absl::Status DistKVStoreCore::SetOptimizer(const OptimizerSpec& spec) {
  RETURN_IF_ERROR(MakeOptimizer(spec.optimizer, spec.optimizer_options).status());
  RETURN_IF_ERROR(LrSchedule::Create(spec.lr_schedule).status());
  optimizer_ = spec;
  has_optimizer_ = true;
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::SetLearningRate(float lr) {
  RETURN_IF_ERROR(CheckLearningRate(lr));
  lr_ = lr;
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::Init(int64_t key, const Tensor& value) {
  if (partitioned_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kvstore init of key ", key, " after the first push or pull; init every key first"));
  }
  if (value.dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("kvstore init of key ", key, ": ", DTypeName(value.dtype()), ", not F32"));
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

absl::Status DistKVStoreCore::InitAuxiliary(int64_t key, const Tensor& value) {
  RETURN_IF_ERROR(Init(key, value));
  auxiliary_keys_.push_back(key);
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::PushPull(int64_t key, const Tensor& grad, Tensor* out) {
  ASSIGN_OR_RETURN(Key * k, Find(key, grad, "push"));
  RETURN_IF_ERROR(Find(key, *out, "pull").status());
  return SendGradient(key, k, grad, out->data<float>());
}

absl::Status DistKVStoreCore::Wait(int64_t key) {
  if (key < 0 || key >= static_cast<int64_t>(keys_.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("kvstore wait of key ", key, " before its init"));
  }
  Key& k = *keys_[key];
  if (!k.in_flight) return absl::OkStatus();
  transport_->Flush();  // pushes held to be fused go now: this one's answer needs them
  absl::Status failure;
  while (true) {
    std::vector<int> lost;
    {
      absl::MutexLock lock(&mu_);
      const auto answered = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return k.awaiting == 0 || job_ended_ || !stream_error_.ok() || !lost_.empty();
      };
      while (true) {
        const int64_t seen = answers_;
        if (mu_.AwaitWithTimeout(absl::Condition(&answered), options_.answer_timeout)) break;
        if (answers_ == seen) {
          stream_error_ = TimedOut(key, k);
          break;
        }
      }
      if (k.awaiting == 0) {
        k.in_flight = false;
        break;
      }
      if (job_ended_ || !stream_error_.ok()) {
        failure = Interrupted();
        break;
      }
      lost.swap(lost_);
    }
    // A shard died in a job with replicas: its backup takes its parts over, and the wait goes on.
    const absl::Status taken = TakeOver(lost);
    if (!taken.ok()) StopOnFailure(lost.front(), taken).IgnoreError();
  }
  if (!failure.ok()) {
    // The caller may free its tensors once this returns: nothing may touch them any more.
    StopStreams();
    return WithTheJobsVerdict(std::move(failure));
  }
  // Every answer is in, so the shard has read the whole push: the transport lets go of the
  // gradient's memory at once, if it has not already.
  k.pins.WaitUnpinned();
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::Push(int64_t key, const Tensor& grad) {
  ASSIGN_OR_RETURN(Key * k, Find(key, grad, "push"));
  if (k->in_flight) {
    return InFlight(key);
  }
  if (k->pushed_copy.shape() != grad.shape()) {  // allocated once per key
    k->pushed_copy = Tensor(grad.shape());
    k->pushed_result.resize(grad.numel());
  }
  std::memcpy(k->pushed_copy.raw(), grad.raw(), grad.numel() * sizeof(float));
  RETURN_IF_ERROR(SendGradient(key, k, k->pushed_copy, k->pushed_result.data()));
  k->result_unread = true;
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::Pull(int64_t key, Tensor* out) {
  ASSIGN_OR_RETURN(Key * k, Find(key, *out, "pull"));
  RETURN_IF_ERROR(Wait(key));
  if (!k->result_unread) return PullCurrent(key, out);
  std::memcpy(out->raw(), k->pushed_result.data(), k->pushed_result.size() * sizeof(float));
  k->result_unread = false;
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::Barrier() {
  transport_->Flush();  // the other workers may be waiting for this one's pushes
  // Not numbered: a worker that joined an elastic job has passed fewer.
  return membership_->Barrier("user barrier", 0, shards_.generation).status();
}

absl::StatusOr<std::vector<std::string>> DistKVStoreCore::Exchange(std::string payload) {
  transport_->Flush();  // as Barrier's
  return membership_->Exchange("user exchange", std::move(payload), shards_.generation);
}

void DistKVStoreCore::OnAnswers(int shard, absl::Span<const Answer> answers) {
  // One lock to check and claim the message's answers and one to count them in: a waiting
  // caller wakes once a message, not once a part.
  thread_local std::vector<absl::Span<float>> destinations;
  destinations.clear();
  {
    absl::MutexLock lock(&mu_);
    for (const Answer& a : answers) {
      const Part* part = nullptr;
      const absl::Status valid = CheckAnswer(shard, a.header, TotalBytes(a.values), &part);
      if (!valid.ok()) {  // the wait fails; nothing of this message is written
        if (stream_error_.ok()) stream_error_ = valid;
        return;
      }
      Key& k = *keys_[a.header.id.key];
      k.pending[a.header.id.part] = 0;  // claimed: a duplicate arriving meanwhile is refused
      destinations.push_back(absl::MakeSpan(k.destination + part->offset, part->elements));
    }
  }
  // Outside the lock: each part's destination is its answer's alone. The sizes were checked.
  absl::Status decoded;
  for (size_t i = 0; i < answers.size() && decoded.ok(); ++i) {
    const PartHeader& h = answers[i].header;
    decoded = DecodeValues(h.encoding, answers[i].values, h.threshold, destinations[i]);
    if (!decoded.ok()) {
      decoded = absl::InternalError(absl::StrCat(membership_->name(), ": shard ", shard,
                                                 "'s answer of key ", h.id.key, " part ",
                                                 h.id.part, ": ", decoded.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  if (!decoded.ok()) {
    if (stream_error_.ok()) stream_error_ = decoded;
    return;
  }
  for (const Answer& a : answers) {
    Key& k = *keys_[a.header.id.key];
    k.versions[a.header.id.part] = a.header.version;
    --k.awaiting;
    ++answers_;
  }
}

void DistKVStoreCore::OnStreamEnd(int shard, const absl::Status& status) {
  if (replicas_ > 1 && absl::IsUnavailable(status)) {
    absl::MutexLock lock(&mu_);
    if (!closing_ && !job_ended_ && stream_error_.ok()) {
      lost_.push_back(shard);  // the waiting caller takes its parts over to the backup
      return;
    }
  }
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    if (stream_error_.ok()) closed_by_shard_ = true;
  }
  // A dead shard's stream ends Unavailable; a shard that refused a push ends it with the
  // refusal's code (Recover tells the two apart).
  StopOnFailure(shard, absl::Status(status.ok() ? absl::StatusCode::kUnavailable : status.code(),
                                    absl::StrCat(membership_->name(), ": the stream to shard ",
                                                 shard, " at ", transport_->shard_address(shard),
                                                 " ended: ",
                                                 status.ok() ? "closed by the shard"
                                                             : status.message(),
                                                 absl::IsUnavailable(status)
                                                     ? " (did the shard die?)"
                                                     : "")))
      .IgnoreError();  // kept for the wait it ends
}

absl::Status DistKVStoreCore::WithTheJobsVerdict(absl::Status failure) {
  {
    absl::MutexLock lock(&mu_);
    if (!closed_by_shard_) return failure;
    // A shard closes its streams only as it leaves a job that ended: the end listener says when
    // this worker hears of it.
    mu_.AwaitWithTimeout(absl::Condition(&job_ended_), kVerdictWait);
  }
  const absl::Status end = membership_->end_status();
  return end.ok() ? failure : end;
}

absl::Status DistKVStoreCore::StopOnFailure(int shard, absl::Status failure) {
  if (absl::IsUnavailable(failure)) failure = WithLostShard(std::move(failure), shard);
  absl::MutexLock lock(&mu_);
  if (!closing_ && !job_ended_ && stream_error_.ok()) stream_error_ = failure;
  return failure;
}

absl::StatusOr<DistKVStoreCore::Key*> DistKVStoreCore::Find(int64_t key, const Tensor& t,
                                                            absl::string_view what) {
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

absl::Status DistKVStoreCore::SendGradient(int64_t key, Key* k, const Tensor& grad,
                                           float* destination) {
  if (k->in_flight) {
    return InFlight(key);
  }
  const std::vector<int>& parts = map_.key_parts[key];
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || !stream_error_.ok() || job_ended_) {
      failure = Interrupted();
    } else {
      k->destination = destination;
      k->awaiting = static_cast<int>(parts.size());
      k->pending.assign(parts.size(), 1);
      k->in_flight = true;
    }
  }
  if (!failure.ok()) {  // other keys may be in flight: stop them before the caller gives up
    StopStreams();
    return failure;
  }
  k->result_unread = false;
  k->gradient = grad.span<float>();
  k->lr = lr_;
  if (options_.compression.encoding == WireEncoding::kTwoBit && k->residual.empty()) {
    k->residual.assign(k->gradient.size(), 0.0f);
  }
  for (int index : parts) {
    const Part& p = map_.parts[index];
    k->sent[p.index] = k->versions[p.index];
    SendPart(key, k, p);
  }
  return absl::OkStatus();
}

void DistKVStoreCore::SendPart(int64_t key, Key* k, const Part& p) {
  const GradientCompression& c = options_.compression;
  const bool two_bit = c.encoding == WireEncoding::kTwoBit;
  transport_->Send(p.shard, OutgoingPart{PartHeader{{key, p.index}, k->sent[p.index], rank(),
                                                    shards_.generation, c.encoding,
                                                    two_bit ? c.threshold : 0.0f, k->lr},
                                         k->gradient.subspan(p.offset, p.elements), &k->pins,
                                         two_bit ? k->residual.data() + p.offset : nullptr});
}

void DistKVStoreCore::StopStreams() {
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    closing_ = true;
  }
  transport_->Close();
  for (size_t key = 0; key < keys_.size(); ++key) {
    if (!keys_[key]->pins.WaitUnpinnedFor(absl::Seconds(10))) {
      std::cerr << membership_->name() << ": the transport still holds key " << key
                << "'s pushed gradient 10 s after its streams ended\n";
    }
  }
}

absl::Status DistKVStoreCore::CheckAnswer(int shard, const PartHeader& h, size_t bytes,
                                          const Part** part) {
  const auto unexpected = [&](absl::string_view why) {
    return absl::InternalError(absl::StrCat(membership_->name(), ": shard ", shard,
                                            " answered key ", h.id.key, " part ", h.id.part,
                                            " version ", h.version, ", but ", why));
  };
  if (h.id.key < 0 || h.id.key >= static_cast<int64_t>(keys_.size()) ||
      h.id.part < 0 || h.id.part >= static_cast<int>(map_.key_parts[h.id.key].size())) {
    return unexpected("this worker has no such part");
  }
  *part = &map_.parts[map_.key_parts[h.id.key][h.id.part]];
  const Key& k = *keys_[h.id.key];
  if ((*part)->shard != shard) return unexpected("another shard holds it");
  const WireEncoding expected = AnswerEncoding(options_.compression.encoding);
  if (h.encoding != expected) {
    return unexpected(absl::StrCat("in ", WireEncodingName(h.encoding), ", not ",
                                   WireEncodingName(expected)));
  }
  if (bytes != EncodedBytes(expected, (*part)->elements)) {
    return unexpected(absl::StrCat("the part has ", (*part)->elements, " elements (",
                                   EncodedBytes(expected, (*part)->elements), " bytes of ",
                                   WireEncodingName(expected), "), not the ", bytes, " sent"));
  }
  if (!k.in_flight || !k.pending[h.id.part]) {
    return unexpected("this worker has no push of it waiting for an answer");
  }
  const int64_t sent = k.sent[h.id.part];
  if (mode_ == KVStoreMode::kDistSync ? h.version != sent + 1 : h.version <= sent) {
    return unexpected(absl::StrCat("the push was computed on version ", sent));
  }
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::Interrupted() {
  if (!stream_error_.ok()) return stream_error_;
  absl::Status end = membership_->end_status();
  if (!end.ok()) return end;
  return absl::AbortedError(
      absl::StrCat("the job ended while ", membership_->name(), " waited for the shards"));
}

absl::Status DistKVStoreCore::TimedOut(int64_t key, const Key& k) {
  // The first part not answered (every part may be claimed, its bytes still being copied).
  int part = 0;
  while (part < static_cast<int>(k.pending.size()) && !k.pending[part]) ++part;
  if (part == static_cast<int>(k.pending.size())) part = 0;
  const int shard = map_.parts[map_.key_parts[key][part]].shard;
  return absl::DeadlineExceededError(absl::StrCat(
      membership_->name(), ": no answer from any shard for ",
      absl::FormatDuration(options_.answer_timeout), " while waiting for key ", key, " part ",
      part, " from shard ", shard, " at ", transport_->shard_address(shard),
      " (version ", k.sent[part] + 1, "); is a worker stuck, or was the answer lost?"));
}

absl::Status DistKVStoreCore::Partition() {
  partitioned_ = true;
  std::vector<TensorSize> sizes;
  for (const auto& k : keys_) sizes.push_back({k->shape.numel(), 4});
  ASSIGN_OR_RETURN(map_,
                   PartitionParameters(sizes, transport_->num_shards(), options_.part_bytes));
  fingerprint_ = map_.Fingerprint();
  for (size_t key = 0; key < keys_.size(); ++key) {
    Key& k = *keys_[key];
    k.versions.assign(map_.key_parts[key].size(), 0);
    k.sent.assign(map_.key_parts[key].size(), 0);
  }
  return absl::OkStatus();
}

absl::Status DistKVStoreCore::OpenStreams() {
  if (rank() == 0) RETURN_IF_ERROR(InitShards());
  ReleaseInitialValues();
  RETURN_IF_ERROR(
      membership_->Barrier("kvstore init", fingerprint_, shards_.generation).status());
  transport_->Open(this);
  return absl::OkStatus();
}

bool DistKVStoreCore::holds_initial_values() const {
  return !keys_.empty() && !keys_[0]->initial.empty();
}

void DistKVStoreCore::ReleaseInitialValues() {
  for (auto& k : keys_) std::vector<float>().swap(k->initial);
}

DistKVStoreCore::Interruption DistKVStoreCore::interruption() const {
  absl::MutexLock lock(&mu_);
  return {job_ended_, generation_heard_ > shards_.generation, stream_error_};
}

void DistKVStoreCore::WarnAboutIdleShards() const {
  const int idle = static_cast<int>(
      std::count(map_.shard_bytes.begin(), map_.shard_bytes.end(), int64_t{0}));
  if (idle == 0) return;
  // The partition splits tensors down to single elements before it leaves a shard empty.
  std::cerr << membership_->name() << ": " << idle << " of " << map_.num_shards
            << " shards hold no parameters: the model's parameters split into only "
            << map_.parts.size() << " parts; start at most " << map_.parts.size()
            << " shards\n";
}

absl::Status DistKVStoreCore::InitShards() {
  if (!has_optimizer_) {
    return absl::FailedPreconditionError("kvstore: rank 0 must call SetOptimizer before Init");
  }
  WarnAboutIdleShards();
  for (int s = 0; s < transport_->num_shards(); ++s) {
    RETURN_IF_ERROR(transport_->InitShard(s, ShardConfigFor(s), InitialParts(s, {})).status());
  }
  return absl::OkStatus();
}

std::vector<InitialPart> DistKVStoreCore::InitialParts(int shard,
                                                       absl::Span<const float> placeholder) const {
  std::vector<InitialPart> parts;
  for (const Part& p : map_.parts) {
    const bool backup = shards_.BackupOf(p.shard) == shard;
    if (p.shard != shard && !backup) continue;
    parts.push_back({{p.key, p.index},
                     placeholder.empty()
                         ? absl::MakeConstSpan(keys_[p.key]->initial).subspan(p.offset, p.elements)
                         : placeholder.first(p.elements),
                     backup, p.shard});
  }
  return parts;
}

ShardConfig DistKVStoreCore::ShardConfigFor(int shard) const {
  ShardConfig config;
  config.num_workers = num_workers();
  config.mode = mode_;
  config.partition_fingerprint = fingerprint_;
  config.optimizer = optimizer_;
  config.auxiliary_keys = auxiliary_keys_;
  // With replicas the shard also holds the parts of the shard it backs up.
  config.num_parts = static_cast<int>(
      std::count_if(map_.parts.begin(), map_.parts.end(), [&](const Part& p) {
        return p.shard == shard || shards_.BackupOf(p.shard) == shard;
      }));
  if (const int backup = shards_.BackupOf(shard); backup >= 0) {
    config.backup_address = shards_.addresses[backup];
  }
  config.generation = shards_.generation;
  config.fusion_bytes = options_.fusion_bytes;
  return config;
}

void DistKVStoreCore::Redial(ShardsView shards) {
  transport_->Redial(shards.addresses);
  shards_ = std::move(shards);
  absl::MutexLock lock(&mu_);
  generation_heard_ = std::max(generation_heard_, shards_.generation);
}

void DistKVStoreCore::ReopenStreams() {
  {
    absl::MutexLock lock(&mu_);
    stream_error_ = absl::OkStatus();
    closing_ = false;
    lost_.clear();  // every stream opens anew
    for (auto& k : keys_) {
      k->in_flight = false;
      k->result_unread = false;
      k->awaiting = 0;
      std::fill(k->pending.begin(), k->pending.end(), 0);
    }
    if (generation_heard_ > shards_.generation) {  // it moved on again: the next push says so
      stream_error_ = MembershipChangedError(generation_heard_, "while recovering");
    }
  }
  transport_->Open(this);
}

absl::StatusOr<int64_t> DistKVStoreCore::SetUpRestartedShard(int shard,
                                                             const ShardConfig& config) {
  int64_t largest = 1;
  for (const Part& p : map_.parts) largest = std::max(largest, p.elements);
  const std::vector<float> placeholder(largest);
  return transport_->InitShard(shard, config, InitialParts(shard, placeholder));
}

absl::StatusOr<int64_t> DistKVStoreCore::StartStep() {
  int64_t least = -1;
  std::string least_part;
  for (size_t key = 0; key < keys_.size(); ++key) {
    const std::vector<int64_t>& versions = keys_[key]->versions;
    for (size_t part = 0; part < versions.size(); ++part) {
      const std::string where = absl::StrCat("key ", key, " part ", part, " (shard ",
                                             map_.parts[map_.key_parts[key][part]].shard, ")");
      if (least >= 0 && mode_ == KVStoreMode::kDistSync && versions[part] != least) {
        return absl::InternalError(absl::StrCat(
            membership_->name(), ": the shards start at different steps: ", least_part, " at ",
            least, ", ", where, " at ", versions[part],
            "; were they resumed from different checkpoints? Give every shard the same --resume "
            "folder"));
      }
      if (least < 0 || versions[part] < least) {
        least = versions[part];
        least_part = where;
      }
    }
  }
  if (least <= 0) return 0;
  return mode_ == KVStoreMode::kDistAsync ? least / num_workers() : least;
}

absl::Status DistKVStoreCore::PullCurrent(int64_t key, Tensor* out) {
  float* dst = out->data<float>();
  Key& k = *keys_[key];
  std::vector<float> values;
  for (int index : map_.key_parts[key]) {
    const Part& p = map_.parts[index];
    const PartId id{key, p.index};
    absl::StatusOr<PartHeader> h = transport_->Pull(p.shard, id, &values);
    if (!h.ok()) {  // a shard that died meanwhile is recovered from as a stream's end
      return StopOnFailure(
          p.shard, absl::Status(h.status().code(),
                                absl::StrCat(membership_->name(), ": pull of key ", key,
                                             " part ", p.index, " from shard ", p.shard, " at ",
                                             transport_->shard_address(p.shard), ": ",
                                             h.status().message())));
    }
    if (!(h->id == id) || static_cast<int64_t>(values.size()) != p.elements) {
      return absl::InternalError(absl::StrCat(membership_->name(), ": shard ", p.shard,
                                              " answered a pull of key ", key, " part ", p.index,
                                              " with another part"));
    }
    std::memcpy(dst + p.offset, values.data(), values.size() * sizeof(float));
    k.versions[p.index] = h->version;
  }
  return absl::OkStatus();
}

}  // namespace cohort
