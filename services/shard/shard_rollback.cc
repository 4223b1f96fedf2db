#include "services/shard/shard_rollback.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/checkpoint/shard_checkpoint.h"
#include "trainer/base/status_macros.h"

namespace cohort {

ShardRollback::ShardRollback(ShardCore* core, std::string checkpoint_dir, bool writes_checkpoints,
                             std::ostream* out, std::ostream* err)
    : core_(core),
      checkpoint_dir_(std::move(checkpoint_dir)),
      writes_checkpoints_(writes_checkpoints),
      out_(out),
      err_(err) {}

void ShardRollback::SetUp(int rank, int num_shards, ShardMetrics* metrics) {
  rank_ = rank;
  num_shards_ = num_shards;
  metrics_ = metrics;
}

void ShardRollback::set_checkpointer(ShardCheckpointer* checkpointer) {
  checkpointer_ = checkpointer;
}

absl::Status ShardRollback::Resume(const std::string& folder, absl::Span<const int> shares) {
  absl::StatusOr<ResumePoint> point = LoadLatestShardCheckpoint(folder, shares, num_shards_);
  if (!point.ok()) {
    return absl::Status(point.status().code(),
                        absl::StrCat("shard ", rank_, ": cannot resume from ", folder, ": ",
                                     point.status().message()));
  }
  for (const std::string& line : point->refused) {
    *err_ << "shard " << rank_ << ": skipping a newer checkpoint: " << line << "\n";
  }
  Announce(point->checkpoint.step, folder, "resuming from");
  {
    absl::MutexLock lock(&mu_);
    resumed_num_workers_ = point->checkpoint.num_workers;
    resumed_steps_per_epoch_ = point->checkpoint.steps_per_epoch;
  }
  if (writes_checkpoints_ && folder == checkpoint_dir_) {
    absl::MutexLock lock(&undone_mu_);
    undone_ = Undone{point->checkpoint.step, std::move(point->damaged)};
  }
  core_->ResumeFrom(std::move(point->checkpoint));
  return absl::OkStatus();
}

absl::Status ShardRollback::RollBack(int64_t step, const std::optional<Regeneration>& next) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(KeepsCheckpoints());
  ASSIGN_OR_RETURN(ShardCheckpoint checkpoint,
                   LoadShardCheckpoint(checkpoint_dir_, step, core_->Shares(), num_shards_));
  RETURN_IF_ERROR(core_->RollBack(std::move(checkpoint), next));
  // No write of a later step after this one.
  FlushCheckpoints();
  // Files of the undone steps go first; with a new generation, ones numbered for the old number
  // of workers past its first step too, once that step is written.
  const int64_t from = next.has_value() ? std::min(step, next->step) : step;
  Announce(from, checkpoint_dir_, "rolling back to");
  RETURN_IF_ERROR(RemoveStepsAfter(from));
  if (!next.has_value()) return absl::OkStatus();
  core_->CheckpointNow();
  FlushCheckpoints();
  return absl::OkStatus();
}

absl::Status ShardRollback::KeepsCheckpoints() const {
  if (!checkpoint_dir_.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this shard keeps no checkpoints to roll back to: give every shard --checkpoint_dir "
      "(launch --checkpoint_dir)");
}

ShardCheckpoints ShardRollback::Checkpoints() {
  absl::MutexLock lock(&mu_);
  ShardCheckpoints held;
  if (const std::optional<ShardConfig> config = core_->config()) {
    held.configured = true;
    held.num_workers = config->num_workers;
    held.steps_per_epoch = config->optimizer.lr_schedule.steps_per_epoch;
  } else {
    held.num_workers = resumed_num_workers_;
    held.steps_per_epoch = resumed_steps_per_epoch_;
  }
  if (checkpoint_dir_.empty()) return held;
  FlushCheckpoints();  // a checkpoint handed over counts once written
  held.steps = ShardCheckpointSteps(checkpoint_dir_, core_->Shares());
  absl::MutexLock undone_lock(&undone_mu_);
  if (undone_.has_value()) {
    const int64_t after = undone_->after;
    held.steps.erase(std::remove_if(held.steps.begin(), held.steps.end(),
                                    [after](int64_t s) { return s > after; }),
                     held.steps.end());
  }
  return held;
}

void ShardRollback::ClearUndoneSteps() {
  std::optional<Undone> undone;
  {
    absl::MutexLock lock(&undone_mu_);
    undone = std::exchange(undone_, std::nullopt);
  }
  if (!undone.has_value()) return;
  for (const int64_t version : undone->damaged) {
    const absl::StatusOr<std::optional<std::string>> aside =
        SetCheckpointAsideIfDamaged(checkpoint_dir_, version, ShardCheckpointManifests(num_shards_));
    if (!aside.ok()) {
      *err_ << "shard " << rank_ << ": error: " << aside.status().message() << "\n";
    } else if (aside->has_value()) {
      *out_ << "shard " << rank_ << ": the damaged checkpoint "
            << CheckpointFolder(checkpoint_dir_, version) << " is kept aside as " << **aside
            << " for a person to look at\n"
            << std::flush;
    }
  }
  if (absl::Status s = RemoveShardFilesAfter(checkpoint_dir_, rank_, undone->after); !s.ok()) {
    *err_ << "shard " << rank_ << ": error: " << s.message() << "\n";
  }
}

void ShardRollback::Announce(int64_t step, const std::string& folder, absl::string_view what) {
  *out_ << absl::StrFormat("shard %d: %s step %d (%s)\n", rank_, what, step,
                           CheckpointFolder(folder, step))
        << std::flush;
  if (metrics_ != nullptr) metrics_->resumed_step.Set(static_cast<double>(step));
}

absl::Status ShardRollback::RemoveStepsAfter(int64_t step) {
  if (!writes_checkpoints_) return absl::OkStatus();
  ClearUndoneSteps();
  return RemoveShardFilesAfter(checkpoint_dir_, rank_, step);
}

void ShardRollback::FlushCheckpoints() {
  if (checkpointer_ != nullptr) checkpointer_->Flush();
}

}  // namespace cohort
