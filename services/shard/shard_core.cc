#include "services/shard/shard_core.h"

#include <algorithm>
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
  settings_ = std::make_shared<const PartSettings>(PartSettings{config, std::move(schedule)});
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
  std::unique_ptr<ShardPart> p = NewPart(id, share >= 0 ? share : shard_rank_.load());
  {
    absl::MutexLock part_lock(&p->mu);
    p->leads = leads;
    p->value->data.assign(value.begin(), value.end());
    if (resume_.has_value()) {
      RETURN_IF_ERROR(Restore(id, p.get()));
    } else {
      MaybeCheckpoint(p.get());
    }
    p->ResetPushes();
  }
  parts_.emplace(id, std::move(p));
  if (static_cast<int>(parts_.size()) == expected_parts_) {
    resume_parts_.clear();  // every part has taken its own copy
    resume_.reset();
  }
  return absl::OkStatus();
}

std::unique_ptr<ShardPart> ShardCore::NewPart(PartId id, int share) {
  auto p = std::make_unique<ShardPart>();
  p->id = id;
  p->share = share;
  if (checkpoints_ != nullptr) checkpoints_->Holds(share);
  {
    absl::MutexLock part_lock(&p->mu);
    p->settings = settings_;
    p->value = std::make_unique<PinnedValue>();
    if (!auxiliary_keys_.contains(id.key)) {
      const OptimizerSpec& spec = settings_->config.optimizer;
      p->optimizer = *MakeOptimizer(spec.optimizer, spec.optimizer_options);
    }
  }
  return p;
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
  std::shared_ptr<const PartSettings> settings = settings_;
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
    settings = std::make_shared<const PartSettings>(PartSettings{c, std::move(schedule)});
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
    p->ResetPushes();
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
    if (p->leads) AddCheckpoint(p.get());
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

absl::Status ShardCore::Restore(PartId id, ShardPart* p) {
  auto it = resume_parts_.find(id);
  const std::string where = absl::StrCat("shard ", shard_rank_.load(), ": key ", id.key, " part ",
                                         id.part, " of the checkpoint at step ", resume_->step);
  if (it == resume_parts_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(where, " is missing"));
  }
  return p->Restore(*it->second, where);
}

void ShardCore::MaybeCheckpoint(ShardPart* p) {
  if (checkpoint_every_ <= 0 || !p->leads) return;
  if (p->version % (checkpoint_every_ * PushesPerStep(p->settings->config)) != 0) return;
  AddCheckpoint(p);
}

void ShardCore::AddCheckpoint(ShardPart* p) {
  checkpoints_->Add(p->version / PushesPerStep(p->settings->config), p->share, p->Checkpoint());
}

bool ShardCore::ready() const {
  absl::MutexLock lock(&mu_);
  return configured_ && static_cast<int>(parts_.size()) == expected_parts_;
}

absl::StatusOr<ShardPart*> ShardCore::FindPart(PartId id, absl::string_view what) const {
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

absl::StatusOr<int64_t> ShardCore::Read(PartId id, std::vector<float>* out) {
  ASSIGN_OR_RETURN(ShardPart * p, FindPart(id, "pull"));
  absl::MutexLock lock(&p->mu);
  out->assign(p->value->data.begin(), p->value->data.end());
  return p->version;
}

void ShardCore::Detach(PartSink* sink) {
  std::vector<ShardPart*> parts;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, p] : parts_) parts.push_back(p.get());
  }
  for (ShardPart* p : parts) p->Detach(sink);
}

}  // namespace cohort
