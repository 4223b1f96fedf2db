#include "services/worker/shard_recovery.h"

#include <algorithm>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

// Recovery waits this much past the scheduler's grace for the shards, and asks this often.
constexpr absl::Duration kRecoverySlack = absl::Seconds(10);
constexpr absl::Duration kRecoveryPoll = absl::Milliseconds(100);

// The steps every shard holds a checkpoint of.
std::vector<int64_t> CommonSteps(const std::vector<ShardCheckpoints>& held) {
  std::vector<int64_t> common = held.at(0).steps;
  for (const ShardCheckpoints& h : held) {
    std::vector<int64_t> both;
    std::set_intersection(common.begin(), common.end(), h.steps.begin(), h.steps.end(),
                          std::back_inserter(both));
    common = std::move(both);
  }
  return common;
}

}  // namespace

int64_t RenumberStep(int64_t step, int64_t old_steps_per_epoch, int64_t new_steps_per_epoch) {
  if (old_steps_per_epoch <= 0 || new_steps_per_epoch <= 0) return step;
  const int64_t epoch = step / old_steps_per_epoch;
  const int64_t within = step % old_steps_per_epoch;
  return epoch * new_steps_per_epoch +
         std::min(new_steps_per_epoch - 1, within * new_steps_per_epoch / old_steps_per_epoch);
}

ShardRecovery::ShardRecovery(DistKVStoreCore* core, JobMembership* membership)
    : core_(core), membership_(membership), transport_(core->transport()) {}

absl::Status ShardRecovery::Recover(const absl::Status& failure, absl::Status* standing) {
  const DistKVStoreCore::Interruption why = core_->interruption();
  if (why.job_ended) return failure;
  // The job's workers changed: said by the failure itself (a barrier), or heard meanwhile.
  const bool regroup = ChangedGeneration(failure).has_value() ||
                       ChangedGeneration(*standing).has_value() || why.newer_generation;
  // Else only a shard's stream ending as a dead shard's does, in a job whose scheduler waits
  // for dead shards to come back.
  if (!regroup && (!standing->ok() || !absl::IsUnavailable(why.stream_error) ||
                   core_->shards().restart_grace <= absl::ZeroDuration())) {
    return failure;
  }
  const auto failed = [&](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat(failure.message(), "; then, recovering: ", s.message()));
  };
  core_->StopStreams();
  if (!regroup) {
    const absl::Status s = RecoverShards(failure);
    if (!ChangedGeneration(s).has_value()) return s.ok() ? s : failed(s);
    // The workers changed meanwhile: they regroup, and the restarted shard with them.
  }
  std::cerr << membership_->name() << ": " << failure.message() << "; regrouping\n";
  if (absl::Status s = MoveToCurrentGeneration(); !s.ok()) return failed(s);
  *standing = Regroup();
  if (!standing->ok()) return failed(*standing);
  return absl::OkStatus();
}

absl::Status ShardRecovery::RecoverShards(const absl::Status& failure) {
  const int64_t generation = core_->shards().generation;
  // Named by the generation, not counted: a worker that joined an elastic job saw fewer.
  const std::string round = absl::StrCat("generation ", generation, ": shard recovery");
  // No worker pushes on the old streams once a shard goes back.
  RETURN_IF_ERROR(membership_->Barrier(round + ": streams closed", 0, generation).status());
  ShardsView view;
  ASSIGN_OR_RETURN(const std::vector<int> restarted, WaitForRestartedShards(&view));
  std::cerr << failure.message() << "; the shards are back ("
            << absl::StrJoin(view.addresses, ", ") << "): rolling back\n";
  core_->Redial(std::move(view));
  if (core_->rank() == 0) {
    RETURN_IF_ERROR(RollBackShards(restarted));
    set_up_ = core_->shards().incarnations;
  }
  RETURN_IF_ERROR(membership_->Barrier(round + ": shards rolled back", 0, generation).status());
  // Rank 0 may have waited for more shards than this worker saw restart.
  RETURN_IF_ERROR(FollowRestartsMeanwhile());
  core_->ReopenStreams();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ShardRecovery::WaitForRestartedShards(ShardsView* view) {
  const ShardsView& before = core_->shards();
  const std::vector<std::string>& set_up = set_up_.empty() ? before.incarnations : set_up_;
  // The scheduler answers once every shard is up; a shard that came back is another process.
  // A stream that ended while its shard lives brings none back: given up after the grace.
  const absl::Time deadline = absl::Now() + before.restart_grace + kRecoverySlack;
  std::vector<int> restarted;
  for (bool first = true; first || (restarted.empty() && core_->rank() == 0); first = false) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no shard came back within ", absl::FormatDuration(before.restart_grace)));
    }
    ASSIGN_OR_RETURN(*view, membership_->WaitForShards(left));
    if (view->generation != before.generation) {
      return MembershipChangedError(view->generation, "while a shard restarted");
    }
    for (size_t s = 0; s < view->incarnations.size(); ++s) {
      if (s >= set_up.size() || view->incarnations[s] != set_up[s]) {
        restarted.push_back(static_cast<int>(s));
      }
    }
    if (restarted.empty() && core_->rank() == 0) absl::SleepFor(kRecoveryPoll);
  }
  return restarted;
}

absl::Status ShardRecovery::MoveToCurrentGeneration() {
  ASSIGN_OR_RETURN(ShardsView view,
                   membership_->WaitForShards(core_->shards().restart_grace + kRecoverySlack));
  core_->Redial(std::move(view));
  return absl::OkStatus();
}

absl::Status ShardRecovery::FollowRestartsMeanwhile() {
  ASSIGN_OR_RETURN(ShardsView view,
                   membership_->WaitForShards(core_->shards().restart_grace + kRecoverySlack));
  if (view.generation != core_->shards().generation) {
    return MembershipChangedError(view.generation, "while rank 0 set the shards up");
  }
  if (view.incarnations != core_->shards().incarnations) core_->Redial(std::move(view));
  return absl::OkStatus();
}

absl::Status ShardRecovery::Regroup() {
  while (true) {
    const absl::Status s = RegroupOnce();
    if (!ChangedGeneration(s).has_value()) return s;
    std::cerr << membership_->name() << ": " << s.message() << "; regrouping again\n";
    RETURN_IF_ERROR(MoveToCurrentGeneration());
  }
}

absl::Status ShardRecovery::RegroupOnce() {
  const int64_t generation = core_->shards().generation;
  if (core_->rank() < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        membership_->name(), " is not one of generation ", generation,
        "'s workers: the scheduler took it for dead (no heartbeat in time)"));
  }
  if (update_rule_ != nullptr) {
    ASSIGN_OR_RETURN(const OptimizerSpec spec, update_rule_(core_->num_workers()));
    RETURN_IF_ERROR(core_->SetOptimizer(spec));
  }
  const std::string round = absl::StrCat("generation ", generation);
  // Every worker of the generation has stopped pushing before any shard goes back.
  RETURN_IF_ERROR(membership_->Barrier(round + ": streams closed", 0, generation).status());
  if (core_->rank() == 0) {
    RETURN_IF_ERROR(RegenerateShardsAsTheyComeBack());
    set_up_ = core_->shards().incarnations;
  }
  RETURN_IF_ERROR(
      membership_->Barrier(round + ": shards ready", core_->fingerprint(), generation).status());
  // Rank 0 may have waited for a shard that died meanwhile.
  RETURN_IF_ERROR(FollowRestartsMeanwhile());
  core_->ReleaseInitialValues();
  core_->ReopenStreams();
  return absl::OkStatus();
}

absl::Status ShardRecovery::RegenerateShards(std::optional<RegenerationPlan>* plan) {
  const int num_shards = transport_->num_shards();
  std::vector<ShardCheckpoints> held;
  int configured = 0;
  for (int s = 0; s < num_shards; ++s) {
    ASSIGN_OR_RETURN(held.emplace_back(), transport_->ListCheckpoints(s));
    configured += held.back().configured ? 1 : 0;
  }
  // No worker got as far as initialising them.
  if (configured == 0 && core_->holds_initial_values()) return core_->InitShards();
  // The others restarted from a checkpoint meanwhile: set up as the job ran when it was
  // written, before every shard goes to the checkpoint they all hold.
  for (int s = 0; s < num_shards; ++s) {
    if (held[s].configured) continue;
    ShardConfig config = core_->ShardConfigFor(s);
    if (held[s].num_workers > 0) {
      config.num_workers = held[s].num_workers;
      config.optimizer.lr_schedule.steps_per_epoch = held[s].steps_per_epoch;
    }
    RETURN_IF_ERROR(SetUpRestartedShard(s, config).status());
  }
  const LrScheduleOptions& schedule = core_->optimizer().lr_schedule;
  if (!plan->has_value()) {
    const std::vector<int64_t> common = CommonSteps(held);
    if (common.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          membership_->name(), ": the job's workers changed (generation ",
          core_->shards().generation,
          "), but the shards hold no checkpoint in common to go on from: an elastic job needs "
          "--checkpoint_dir and --checkpoint_every on every shard (launch passes them)"));
    }
    // How the checkpoints are numbered: by the settings of a shard that was running (one that
    // restarted has this generation's now; with none left, the numbering is taken to stay).
    ShardCheckpoints was{{}, true, core_->num_workers(), schedule.steps_per_epoch};
    for (const ShardCheckpoints& h : held) {
      if (h.configured) was = h;
    }
    *plan = RegenerationPlan{common.back(), was.num_workers,
                             RenumberStep(common.back(), was.steps_per_epoch,
                                          schedule.steps_per_epoch)};
  }
  const RegenerationPlan& p = **plan;
  for (int s = 0; s < num_shards; ++s) {
    RETURN_IF_ERROR(
        transport_->RollBack(s, p.step, Regeneration{core_->ShardConfigFor(s), p.next_step}));
  }
  std::cerr << membership_->name() << ": generation " << core_->shards().generation << " of "
            << core_->num_workers() << " workers (was " << p.num_workers
            << "): every shard went back to step " << p.step << ", step " << p.next_step
            << " for " << core_->num_workers() << " workers, base lr " << schedule.base_lr
            << "\n";
  return absl::OkStatus();
}

absl::Status ShardRecovery::RegenerateShardsAsTheyComeBack() {
  // The first try's: a shard that died after others went on numbers its steps otherwise.
  std::optional<RegenerationPlan> plan;
  while (true) {
    const absl::Status s = RegenerateShards(&plan);
    if (!absl::IsUnavailable(s)) return s;
    RETURN_IF_ERROR(AwaitShardsBack(s).status());
  }
}

absl::StatusOr<std::vector<int>> ShardRecovery::AwaitShardsBack(const absl::Status& failure) {
  if (core_->shards().restart_grace <= absl::ZeroDuration()) return failure;
  std::cerr << failure.message() << "; waiting for that shard to come back\n";
  ShardsView view;
  ASSIGN_OR_RETURN(std::vector<int> restarted, WaitForRestartedShards(&view));
  core_->Redial(std::move(view));
  return restarted;
}

absl::StatusOr<int64_t> ShardRecovery::SetUpRestartedShard(int shard, const ShardConfig& config) {
  ASSIGN_OR_RETURN(const int64_t resumed, core_->SetUpRestartedShard(shard, config));
  if (resumed < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        membership_->name(), ": shard ", shard, " at ", transport_->shard_address(shard),
        " came back without a checkpoint to resume from: restart it with --resume=<the job's "
        "--checkpoint_dir> (launch --restart_failed_shards does)"));
  }
  return resumed;
}

absl::Status ShardRecovery::RollBackShards(std::vector<int> restarted) {
  // The step each restarted shard resumed from, kept while more shards die meanwhile.
  std::map<int, int64_t> resumed;
  while (true) {
    const absl::Status s = SetUpAndRollBack(restarted, &resumed);
    if (!absl::IsUnavailable(s)) return s;
    // Another shard died meanwhile: it comes back from its checkpoint too.
    ASSIGN_OR_RETURN(restarted, AwaitShardsBack(s));
  }
}

absl::Status ShardRecovery::SetUpAndRollBack(const std::vector<int>& restarted,
                                             std::map<int, int64_t>* resumed) {
  // The restarted shards resumed from their checkpoint: rank 0 sets them up again (the values
  // sent are replaced by the checkpoint's) and learns its step.
  for (int s : restarted) {
    ASSIGN_OR_RETURN((*resumed)[s], SetUpRestartedShard(s, core_->ShardConfigFor(s)));
  }
  if (resumed->empty()) {
    return absl::InternalError(
        absl::StrCat(membership_->name(), ": a shard's stream ended, yet none came back"));
  }
  // Shards that died at different moments may have resumed from different checkpoints: every
  // shard goes to the oldest of them, which every shard holds.
  const auto oldest = std::min_element(
      resumed->begin(), resumed->end(),
      [](const auto& a, const auto& b) { return a.second < b.second; });
  const int64_t step = oldest->second;
  for (int s = 0; s < transport_->num_shards(); ++s) {
    const auto it = resumed->find(s);
    if (it != resumed->end() && it->second == step) continue;
    RETURN_IF_ERROR(transport_->RollBack(s, step));
  }
  std::cerr << membership_->name() << ": every shard is back at step " << step << "\n";
  return absl::OkStatus();
}

}  // namespace cohort
