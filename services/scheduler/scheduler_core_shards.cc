// SchedulerCore and dead shards: one that registers again after a restart, and, in a job of
// replicated shards, the backup that leads a dead shard's parts.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/membership/job_membership.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

absl::StatusOr<int> SchedulerCore::Reregister(const MemberRegistration& r) {
  const int rank = r.requested_rank;
  if (rank >= 0 && rank < static_cast<int>(shards_.size()) && shards_[rank].led_by >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", spec_.job_id, " replicates its shards: shard ", rank, "'s parts are led by its "
        "backup, shard ", shards_[rank].led_by, ", since it died, and a restarted shard does not "
        "take them back"));
  }
  if (rank < 0 || rank >= static_cast<int>(shards_.size()) || !shards_[rank].restarting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", spec_.job_id, " is RUNNING; a shard joins it only to take the place of a dead "
        "one, under its --rank, with launch --restart_failed_shards (",
        rank < 0 ? "no rank"
        : rank >= static_cast<int>(shards_.size())
            ? absl::StrCat("it has ", shards_.size(), " shards, ranks 0..", shards_.size() - 1,
                           "; shard ", rank, " is not one of them")
            : absl::StrCat("shard ", rank, " is not dead"),
        ")"));
  }
  if (absl::Status s = CheckReachable(r, rank); !s.ok()) return s;
  Member& m = shards_[rank];
  notices_.push_back(absl::StrFormat(
      "shard %d is back (host %s, pid %d, at %s) %.1f s after its death; the workers roll back "
      "to its checkpoint",
      rank, r.host, r.pid, r.address, absl::ToDoubleSeconds(clock_->Now() - m.died_at)));
  m = Member();
  ++shard_restarts_[rank];
  return Admit(r, rank);
}

bool SchedulerCore::ShardRestarting() const {
  for (const Member& s : shards_) {
    if (s.restarting) return true;
  }
  return false;
}

int SchedulerCore::LiveBackupOf(int rank) const {
  if (spec_.shard_replicas < 2) return -1;
  ShardsView placed;  // where the parts were placed: by the addresses the shards registered
  placed.replicas = spec_.shard_replicas;
  for (const Member& s : shards_) placed.addresses.push_back(s.address);
  const int backup = placed.BackupOf(rank);
  if (backup < 0 || shards_[backup].dead || shards_[backup].restarting) return -1;
  for (const Member& s : shards_) {
    if (s.led_by == rank) return -1;  // the dead shard held the only copy of those
  }
  return backup;
}

}  // namespace cohort
