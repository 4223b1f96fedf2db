#include "services/shard/shard_core.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status ShardCore::CheckConfig(const ShardConfig& config) const {
  // Bounds before anything is sized by them: a part keeps a slot per worker.
  if (config.num_workers < 1 || config.num_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard_rank_.load(), ": ",
                                                   config.num_workers, " workers (1 to ",
                                                   kMaxWorkers, ")"));
  }
  if (config.num_parts < 0 || config.num_parts > kMaxParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", shard_rank_.load(), ": ", config.num_parts, " parts (0 to ", kMaxParts, ")"));
  }
  if (config.mode == KVStoreMode::kLocal) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", shard_rank_.load(), ": mode local, expected dist_sync or dist_async"));
  }
  if (config.generation < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", shard_rank_.load(), ": membership generation ", config.generation));
  }
  return MakeOptimizer(config.optimizer.optimizer, config.optimizer.optimizer_options).status();
}

absl::Status ShardCore::Configure(const ShardConfig& config) {
  absl::MutexLock lock(&mu_);
  if (configured_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_rank_.load(), " was initialised twice; only rank 0 initialises"));
  }
  RETURN_IF_ERROR(CheckConfig(config));
  ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(config.optimizer.lr_schedule));
  if (resume_.has_value()) {
    RETURN_IF_ERROR(CheckCheckpointFits(*resume_, config));
    RETURN_IF_ERROR(CheckStepsMeanTheSame(*resume_, config));
    for (const PartCheckpoint& part : resume_->parts) resume_parts_[part.id] = &part;
    start_step_ = resume_->step;
    resumed_ = true;
  }
  settings_ = std::make_shared<const Settings>(Settings{config, std::move(schedule)});
  auxiliary_keys_.insert(config.auxiliary_keys.begin(), config.auxiliary_keys.end());
  expected_parts_ = config.num_parts;
  configured_ = true;
  if (checkpoints_ != nullptr) checkpoints_->Configured(config);
  return absl::OkStatus();
}

absl::Status ShardCore::CheckCheckpointFits(const ShardCheckpoint& c,
                                            const ShardConfig& config) const {
  if (c.partition_fingerprint == config.partition_fingerprint &&
      static_cast<int>(c.parts.size()) == config.num_parts &&
      c.mode == KVStoreModeName(config.mode)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "shard ", shard_rank_.load(), ": the checkpoint at step ", c.step, " holds ", c.parts.size(),
      " parts of a ", c.mode, " job (partition ", absl::Hex(c.partition_fingerprint),
      "); this job gives the shard ", config.num_parts, " parts, ", KVStoreModeName(config.mode),
      " (partition ", absl::Hex(config.partition_fingerprint),
      "): resume with the model, --part_bytes, number of shards and --mode it was written with"));
}

absl::Status ShardCore::CheckStepsMeanTheSame(const ShardCheckpoint& c,
                                              const ShardConfig& config) const {
  const int64_t steps_per_epoch = config.optimizer.lr_schedule.steps_per_epoch;
  if (c.num_workers == config.num_workers &&
      (c.steps_per_epoch == 0 || c.steps_per_epoch == steps_per_epoch)) {
    return absl::OkStatus();
  }
  // Bit for bit is what a resume promises; a step of another split of the data is another
  // point of training. An elastic job changes its workers in new generations instead.
  return absl::FailedPreconditionError(absl::StrCat(
      "shard ", shard_rank_.load(), ": the checkpoint at step ", c.step,
      " was written by a job of ", c.num_workers, " workers",
      c.steps_per_epoch > 0 ? absl::StrCat(" at ", c.steps_per_epoch, " steps an epoch") : "",
      "; this job has ", config.num_workers, " workers at ", steps_per_epoch,
      " steps an epoch, so its step ", c.step,
      " would be another point of the data: resume with the -n and --batch_size (and "
      "--train_samples) the checkpoint was written with"));
}

absl::Status ShardCore::AddPart(PartId id, absl::Span<const float> value, int share,
                                bool leads) {
  absl::MutexLock lock(&mu_);
  if (!configured_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_rank_.load(), ": part before the init config"));
  }
  if (parts_.contains(id)) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", shard_rank_.load(), ": key ", id.key,
                                                   " part ", id.part, " initialised twice"));
  }
  auto p = std::make_unique<PartState>();
  {
    absl::MutexLock part_lock(&p->mu);
    p->settings = settings_;
    p->share = share >= 0 ? share : shard_rank_.load();
    p->leads = leads;
    if (checkpoints_ != nullptr) checkpoints_->Holds(p->share);
    p->value = std::make_unique<PinnedValue>();
    p->value->data.assign(value.begin(), value.end());
    if (!auxiliary_keys_.contains(id.key)) {
      const OptimizerSpec& spec = settings_->config.optimizer;
      p->optimizer = *MakeOptimizer(spec.optimizer, spec.optimizer_options);
    }
    if (resume_.has_value()) {
      RETURN_IF_ERROR(Restore(id, p.get()));
    } else {
      MaybeCheckpoint(id, p.get());
    }
    ResetPushes(p.get());
  }
  parts_.emplace(id, std::move(p));
  if (static_cast<int>(parts_.size()) == expected_parts_) {
    resume_parts_.clear();  // every part has taken its own copy
    resume_.reset();
  }
  return absl::OkStatus();
}

absl::Status ShardCore::RollBack(ShardCheckpoint checkpoint,
                                 const std::optional<Regeneration>& next) {
  absl::MutexLock lock(&mu_);
  if (!configured_ || static_cast<int>(parts_.size()) != expected_parts_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_rank_.load(), ": roll back before rank 0 initialised it"));
  }
  const ShardConfig& current = settings_->config;
  RETURN_IF_ERROR(CheckCheckpointFits(checkpoint, current));
  std::shared_ptr<const Settings> settings = settings_;
  if (next.has_value()) {
    const ShardConfig& c = next->config;
    RETURN_IF_ERROR(CheckConfig(c));
    if (c.mode != current.mode || c.partition_fingerprint != current.partition_fingerprint ||
        c.num_parts != current.num_parts || c.auxiliary_keys != current.auxiliary_keys ||
        c.optimizer.optimizer != current.optimizer.optimizer || next->step < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard ", shard_rank_.load(), ": generation ", c.generation, " changes what only the "
          "number of workers and the update rule's rate may change (mode, partition, parts, "
          "optimizer), or starts at step ", next->step));
    }
    ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(c.optimizer.lr_schedule));
    settings = std::make_shared<const Settings>(Settings{c, std::move(schedule)});
  }
  // Every part is checked before any changes: a checkpoint that does not fit leaves the shard
  // as it was.
  absl::flat_hash_map<PartId, const PartCheckpoint*> saved;
  for (const PartCheckpoint& part : checkpoint.parts) saved[part.id] = &part;
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    auto it = saved.find(id);
    if (it == saved.end() || it->second->value.size() != p->value->data.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", shard_rank_.load(), ": the checkpoint at step ", checkpoint.step,
          it == saved.end() ? " lacks key " : " has another size for key ", id.key, " part ",
          id.part));
    }
  }
  ++rollbacks_;  // before any part changes: a push that sees a rolled-back part sees this
  resume_ = std::move(checkpoint);
  resume_parts_ = std::move(saved);
  const int64_t from = resume_->step;
  const int64_t step = next.has_value() ? next->step : from;
  absl::Status status;
  int dropped = 0;  // pushes that waited for their version's last one
  int64_t version = 0;
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    if (p->optimizer != nullptr) {
      const OptimizerSpec& spec = p->settings->config.optimizer;
      p->optimizer = *MakeOptimizer(spec.optimizer, spec.optimizer_options);
    }
    status.Update(Restore(id, p.get()));
    dropped += p->arrived;
    p->held.clear();  // answers of an undone past: the workers closed their streams
    p->replicated_pushes.clear();
    p->settings = settings;
    if (next.has_value()) p->version = step * PushesPerStep(settings->config);
    version = std::max(version, p->version);
    ResetPushes(p.get());
  }
  settings_ = std::move(settings);
  start_step_ = step;
  highest_version_ = version;
  if (ShardMetrics* m = metrics_.load()) {
    m->pulls_waiting.Decrement(dropped);
    m->parameter_version.Set(static_cast<double>(version));
  }
  if (checkpoints_ != nullptr) {
    checkpoints_->RolledBack(std::min(from, step));
    if (next.has_value()) checkpoints_->Configured(settings_->config);
  }
  resume_parts_.clear();
  resume_.reset();
  return status;
}

void ShardCore::CheckpointNow() {
  if (checkpoints_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    if (p->leads) AddCheckpoint(id, p.get());
  }
}

std::vector<int> ShardCore::Shares() const {
  const int own = shard_rank_.load();
  std::set<int> others;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [id, p] : parts_) {
    if (p->share != own) others.insert(p->share);
  }
  std::vector<int> shares = {own};
  shares.insert(shares.end(), others.begin(), others.end());
  return shares;
}

bool ShardCore::resumed() const {
  absl::MutexLock lock(&mu_);
  return resumed_;
}

std::optional<ShardConfig> ShardCore::config() const {
  absl::MutexLock lock(&mu_);
  if (settings_ == nullptr) return std::nullopt;
  return settings_->config;
}

int64_t ShardCore::start_step() const {
  absl::MutexLock lock(&mu_);
  return start_step_;
}

void ShardCore::ResetPushes(PartState* p) {
  p->arrived = 0;
  const ShardConfig& config = p->settings->config;
  if (config.mode == KVStoreMode::kDistSync) {
    p->slots.resize(config.num_workers);  // allocated on first use
    p->pushed.assign(config.num_workers, 0);
    p->waiting.assign(config.num_workers, nullptr);
  } else {
    p->async_pushed_on.assign(config.num_workers, -1);
    // An auxiliary part: until a worker pushes, it counts with the part's value.
    if (p->optimizer == nullptr) p->slots.assign(config.num_workers, p->value->data);
  }
}

absl::Status ShardCore::Restore(PartId id, PartState* p) {
  auto it = resume_parts_.find(id);
  const std::string where = absl::StrCat("shard ", shard_rank_.load(), ": key ", id.key, " part ",
                                         id.part, " of the checkpoint at step ", resume_->step);
  if (it == resume_parts_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(where, " is missing"));
  }
  const PartCheckpoint& saved = *it->second;
  const size_t elements = p->value->data.size();
  if (saved.value.size() != elements) {
    return absl::FailedPreconditionError(absl::StrCat(where, " has ", saved.value.size(),
                                                      " elements; the model's part has ",
                                                      elements));
  }
  WritableValue(p) = saved.value;
  p->version = saved.version;
  if (p->optimizer == nullptr) return absl::OkStatus();  // auxiliary
  const absl::Status loaded =
      p->optimizer->LoadState(0, static_cast<int64_t>(elements), saved.optimizer);
  if (!loaded.ok()) return absl::DataLossError(absl::StrCat(where, ": ", loaded.message()));
  return absl::OkStatus();
}

void ShardCore::MaybeCheckpoint(PartId id, PartState* p) {
  if (checkpoint_every_ <= 0 || !p->leads) return;
  if (p->version % (checkpoint_every_ * PushesPerStep(p->settings->config)) != 0) return;
  AddCheckpoint(id, p);
}

void ShardCore::AddCheckpoint(PartId id, PartState* p) {
  checkpoints_->Add(p->version / PushesPerStep(p->settings->config), p->share,
                    {id, p->version, p->value->data,
                     p->optimizer != nullptr ? p->optimizer->SaveState(0) : OptimizerState{}});
}

bool ShardCore::ready() const {
  absl::MutexLock lock(&mu_);
  return configured_ && static_cast<int>(parts_.size()) == expected_parts_;
}

absl::StatusOr<ShardCore::PartState*> ShardCore::FindPart(PartId id, absl::string_view what) const {
  // Shared: every stream's pushes look parts up at once; the table changes only before them.
  absl::ReaderMutexLock lock(&mu_);
  if (!configured_ || static_cast<int>(parts_.size()) != expected_parts_) {
    return Refuse(Rejection::kNotReady, absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_rank_.load(), ": ", what, " of key ", id.key, " part ", id.part,
                     " before rank 0 finished initialising the shard")));
  }
  auto it = parts_.find(id);
  if (it == parts_.end()) {
    return Refuse(Rejection::kUnknownPart, absl::NotFoundError(absl::StrCat(
        "shard ", shard_rank_.load(), " does not hold key ", id.key, " part ", id.part,
        ": the worker's partition map differs from the one the shard was initialised with")));
  }
  return it->second.get();
}

absl::Status ShardCore::Push(int rank, PartId id, int64_t version,
                             absl::Span<const float> grad, PartSink* reply_to,
                             int64_t generation) {
  const absl::Span<const char> bytes(reinterpret_cast<const char*>(grad.data()),
                                     grad.size() * sizeof(float));
  return Push(PartHeader{id, version, rank, generation}, ByteChunks(&bytes, 1), reply_to);
}

absl::Status ShardCore::Push(const PartHeader& header, ByteChunks grad, PartSink* reply_to) {
  ASSIGN_OR_RETURN(PartState * p, FindPart(header.id, "push"));
  absl::MutexLock lock(&p->mu);
  RETURN_IF_ERROR(CheckPush(header, grad, *p));
  p->leads = true;  // a worker pushes here: the part's leader died, if it was another shard
  // Compressed pushes are decoded into this thread's buffer and go on as F32.
  thread_local std::vector<float> decoded;
  absl::Span<const char> decoded_bytes;
  if (header.encoding != WireEncoding::kF32) {
    decoded.resize(p->value->data.size());
    RETURN_IF_ERROR(DecodePush(header, grad, absl::MakeSpan(decoded)));
    decoded_bytes = absl::Span<const char>(reinterpret_cast<const char*>(decoded.data()),
                                           decoded.size() * sizeof(float));
    grad = ByteChunks(&decoded_bytes, 1);
  }
  // Refused, not skipped: in dist_sync every worker's push makes the step, and a NaN means the
  // training diverged (or a worker is broken), which no later step undoes.
  if (!AllFinite(grad)) {
    return Refuse(Rejection::kNonFinite,
                  absl::InvalidArgumentError(absl::StrCat(
                      PushWhere(header), " for version ", header.version,
                      " holds NaN or infinite values: the training diverged on that worker "
                      "(lower --lr, add --warmup_epochs, or check its data)",
                      header.encoding == WireEncoding::kF16
                          ? "; with --gradient_compression=fp16, values beyond 65504 overflow "
                            "(bf16 keeps F32's range)"
                          : "")));
  }
  if (AnsweredAsReplicated(header, p, reply_to)) return absl::OkStatus();
  if (p->settings->config.mode == KVStoreMode::kDistAsync) {
    return PushAsync(header, grad, p, reply_to);
  }
  return PushSync(header, grad, p, reply_to);
}

namespace {

// How a message names a push's learning rate (PartHeader::lr).
std::string RateWords(float lr) {
  return lr >= 0 ? absl::StrCat("learning rate ", lr) : "the schedule's learning rate";
}

}  // namespace

std::string ShardCore::PushWhere(const PartHeader& header) const {
  return absl::StrCat("shard ", shard_rank_.load(), ": worker ", header.rank, "'s push of key ",
                      header.id.key, " part ", header.id.part);
}

absl::Status ShardCore::CheckPush(const PartHeader& header, ByteChunks grad,
                                  const PartState& p) const {
  const ShardConfig& config = p.settings->config;
  // Before the rank: ranks are renumbered from one generation to the next.
  if (header.generation != config.generation) {
    return Refuse(Rejection::kStaleGeneration,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " was made in membership generation ", header.generation,
                      ", but the job's workers changed: it is in generation ", config.generation,
                      " (the worker rejoins the job and pulls)")));
  }
  if (header.rank < 0 || header.rank >= config.num_workers) {
    return Refuse(Rejection::kWrongRank,
                  absl::InvalidArgumentError(absl::StrCat("shard ", shard_rank_.load(),
                                                          ": push from rank ", header.rank,
                                                          " in a job of ", config.num_workers,
                                                          " workers")));
  }
  const size_t bytes = TotalBytes(grad);
  const size_t elements = p.value->data.size();
  if (bytes != EncodedBytes(header.encoding, elements)) {
    return Refuse(Rejection::kWrongSize,
                  absl::InvalidArgumentError(absl::StrCat(
                      PushWhere(header), " has ", bytes, " bytes of ",
                      WireEncodingName(header.encoding), " values; the part has ", elements,
                      " elements (", EncodedBytes(header.encoding, elements), " bytes)")));
  }
  return absl::OkStatus();
}

absl::Status ShardCore::DecodePush(const PartHeader& header, ByteChunks grad,
                                   absl::Span<float> out) const {
  const absl::Status valid = DecodeValues(header.encoding, grad, header.threshold, out);
  if (valid.ok()) return valid;
  return Refuse(Rejection::kMalformed,
                absl::InvalidArgumentError(absl::StrCat(PushWhere(header), ": ", valid.message())));
}

absl::Status ShardCore::PushAsync(const PartHeader& header, ByteChunks grad, PartState* p,
                                  PartSink* reply_to) {
  const Settings& settings = *p->settings;
  // Each push is 1/W of a step: the schedule advances one step per W pushes, as in dist_sync.
  const float lr =
      header.lr >= 0
          ? header.lr
          : static_cast<float>(settings.schedule.At(p->version / settings.config.num_workers));
  // Stale pushes are what asynchronous training accepts; a version never produced is a bug.
  if (header.version > p->version) {
    return Refuse(Rejection::kFutureVersion,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " was computed on version ", header.version,
                      ", which the part has not reached (", p->version, ")")));
  }
  if (p->optimizer == nullptr) {
    AverageIntoValue(p, grad, header.rank, absl::MakeSpan(WritableValue(p)));
  } else {
    ApplyPush(p, grad, header.rank, absl::MakeSpan(WritableValue(p)), lr);
  }
  ++p->version;
  p->async_pushed_on[header.rank] = header.version;
  Applied(p->version, 1);
  MaybeCheckpoint(header.id, p);
  Answer(header.id, p, reply_to);
  if (p->backup != nullptr) Forward(header.id, p, lr, header.rank, header.version);
  return absl::OkStatus();
}

absl::Status ShardCore::PushSync(const PartHeader& header, ByteChunks grad, PartState* p,
                                 PartSink* reply_to) {
  const int rank = header.rank;
  const int num_workers = p->settings->config.num_workers;
  if (header.version != p->version) {
    return Refuse(
        header.version < p->version ? Rejection::kStaleVersion : Rejection::kFutureVersion,
        absl::FailedPreconditionError(absl::StrCat(
            PushWhere(header), " was computed on version ", header.version,
            " but the part is at version ", p->version,
            ": every worker must push every key once per step")));
  }
  if (p->pushed[rank]) {
    return Refuse(Rejection::kDuplicate,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " came twice for version ", header.version)));
  }
  if (p->arrived == 0) {
    p->pushed_lr = header.lr;
  } else if (header.lr != p->pushed_lr) {
    return Refuse(Rejection::kMalformed,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " asks for ", RateWords(header.lr), " but ",
                      p->arrived, " push(es) of version ", header.version, " before it asked for ",
                      RateWords(p->pushed_lr), ": every worker sets the same rate at the same "
                      "step")));
  }
  p->pushed[rank] = 1;
  p->waiting[rank] = reply_to;
  if (++p->arrived < num_workers) {
    std::vector<float>& slot = p->slots[rank];
    slot.resize(p->value->data.size());
    CopyChunks(grad, slot.data());
    if (ShardMetrics* m = metrics_.load()) m->pulls_waiting.Increment();
    return absl::OkStatus();
  }
  // The last push of the version is reduced and applied straight from its bytes.
  const float lr = p->pushed_lr >= 0 ? p->pushed_lr
                                    : static_cast<float>(p->settings->schedule.At(p->version));
  if (p->optimizer == nullptr) {
    AverageIntoValue(p, grad, rank, absl::MakeSpan(WritableValue(p)));
  } else {
    ApplyPush(p, grad, rank, absl::MakeSpan(WritableValue(p)), lr);
  }
  ++p->version;
  Applied(p->version, num_workers);
  MaybeCheckpoint(header.id, p);
  p->arrived = 0;
  // The answers go out one after another from this thread (each a write of its stream): each
  // update starts them at another rank, so that no worker is always the last to hear (at 1,024
  // workers the last answer leaves about 0.1 s after the first).
  const int first = static_cast<int>(
      ((static_cast<uint64_t>(p->version) * 0x9E3779B97F4A7C15ull) >> 32) % num_workers);
  for (int i = 0; i < num_workers; ++i) {
    const int r = (first + i) % num_workers;
    if (p->waiting[r] != nullptr) Answer(header.id, p, p->waiting[r]);
    p->waiting[r] = nullptr;
    p->pushed[r] = 0;
  }
  if (p->backup != nullptr) Forward(header.id, p, lr, /*rank=*/-1, header.version);
  return absl::OkStatus();
}

std::vector<float>& ShardCore::WritableValue(PartState* p) {
  p->retired.erase(std::remove_if(p->retired.begin(), p->retired.end(),
                                  [](const auto& v) { return v->readers.count() == 0; }),
                   p->retired.end());
  if (p->value->readers.count() > 0) {
    auto fresh = std::make_unique<PinnedValue>();
    fresh->data = p->value->data;
    p->retired.push_back(std::move(p->value));
    p->value = std::move(fresh);
  }
  return p->value->data;
}

absl::Status ShardCore::Refuse(Rejection reason, absl::Status status) const {
  if (ShardMetrics* m = metrics_.load()) m->Reject(reason);
  return status;
}

void ShardCore::Applied(int64_t version, int pushes) {
  ShardMetrics* m = metrics_.load();
  if (m == nullptr) return;
  m->pushes_applied.Increment(pushes);
  if (pushes > 1) m->pulls_waiting.Decrement(pushes - 1);
  int64_t highest = highest_version_.load();
  while (version > highest && !highest_version_.compare_exchange_weak(highest, version)) {
  }
  m->parameter_version.Set(static_cast<double>(highest_version_.load()));
}

void ShardCore::ApplyPush(PartState* p, ByteChunks grad, int rank, absl::Span<float> value,
                          float lr) {
  const auto start = std::chrono::steady_clock::now();
  if (p->backup != nullptr) p->forwarded.resize(value.size());
  ApplyPushBlocks(p, grad, rank, value, lr);
  if (ShardMetrics* m = metrics_.load()) {
    m->apply_seconds.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

void ShardCore::ApplyPushBlocks(PartState* p, ByteChunks grad, int rank, absl::Span<float> value,
                                float lr) {
  const ShardConfig& config = p->settings->config;
  const int num_workers = config.num_workers;
  const float scale = 1.0f / static_cast<float>(num_workers);
  // Per gRPC thread: the push's block and the reduced block, both small enough to stay in cache.
  thread_local std::vector<float> block(kBlockFloats), reduced(kBlockFloats);
  p->optimizer->BeginUpdate(0, static_cast<int64_t>(value.size()));
  ForEachFloatBlock(grad, absl::MakeSpan(block), [&](size_t first, absl::Span<const float> g) {
    const size_t n = g.size();
    absl::Span<const float> update = g;  // x · 1 == x: W = 1 needs no pass
    if (config.mode == KVStoreMode::kDistAsync && num_workers > 1) {
      for (size_t i = 0; i < n; ++i) reduced[i] = g[i] * scale;
      update = absl::MakeConstSpan(reduced.data(), n);
    } else if (num_workers > 1) {
      // Rank order, whatever order the pushes arrived in: ((g0 + g1) + g2 ...) · (1/W), this
      // push read from its block and the others from their slots.
      const auto rank_values = [&](int r) {
        return r == rank ? g.data() : p->slots[r].data() + first;
      };
      float* sum = reduced.data();
      for (int r = 1; r < num_workers; ++r) {
        const float* a = r == 1 ? rank_values(0) : sum;
        const float* b = rank_values(r);
        if (r + 1 < num_workers) {
          for (size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
        } else {
          for (size_t i = 0; i < n; ++i) sum[i] = (a[i] + b[i]) * scale;
        }
      }
      update = absl::MakeConstSpan(sum, n);
    }
    p->optimizer->Apply(0, static_cast<int64_t>(first), value.subspan(first, n), update, lr);
    if (p->backup != nullptr) std::copy(update.begin(), update.end(), p->forwarded.begin() + first);
  });
}

void ShardCore::AverageIntoValue(PartState* p, ByteChunks grad, int rank,
                                 absl::Span<float> value) {
  std::vector<float>& slot = p->slots[rank];
  slot.resize(value.size());
  CopyChunks(grad, slot.data());
  const int num_workers = p->settings->config.num_workers;
  std::copy(p->slots[0].begin(), p->slots[0].end(), value.begin());
  if (num_workers == 1) return;
  for (int r = 1; r < num_workers; ++r) {
    const std::vector<float>& s = p->slots[r];
    for (size_t i = 0; i < value.size(); ++i) value[i] += s[i];
  }
  const float scale = 1.0f / static_cast<float>(num_workers);
  for (float& v : value) v *= scale;
}

absl::StatusOr<int64_t> ShardCore::Read(PartId id, std::vector<float>* out) {
  ASSIGN_OR_RETURN(PartState * p, FindPart(id, "pull"));
  absl::MutexLock lock(&p->mu);
  out->assign(p->value->data.begin(), p->value->data.end());
  return p->version;
}

void ShardCore::Detach(PartSink* sink) {
  std::vector<PartState*> parts;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, p] : parts_) parts.push_back(p.get());
  }
  for (PartState* p : parts) {
    absl::MutexLock lock(&p->mu);
    for (PartSink*& w : p->waiting) {
      if (w == sink) w = nullptr;
    }
    for (PartState::HeldAnswer& h : p->held) {
      if (h.sink == sink) h.sink = nullptr;
    }
  }
}

}  // namespace cohort
