// SchedulerCore and dead shards: one that registers again after a restart, and, in a job of
// replicated shards, who leads and who backs up each shard's share of the model as shards die
// and come back.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/common/count_text.h"
#include "services/membership/job_membership.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

absl::StatusOr<int> SchedulerCore::Reregister(const MemberRegistration& r) {
  const int rank = r.requested_rank;
  const bool known = rank >= 0 && rank < static_cast<int>(shards_.size());
  if (known && !share_leaders_.empty() && shards_[rank].dead && !shards_[rank].restarting) {
    return BackUpShares(r);
  }
  if (!known || !shards_[rank].restarting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", spec_.job_id, " is RUNNING; a shard joins it only to take the place of a dead "
        "one, under its --rank, with launch --restart_failed_shards (",
        rank < 0 ? "no rank"
        : !known ? absl::StrCat("it has ", shards_.size(), " shards, ranks 0..",
                                shards_.size() - 1, "; shard ", rank, " is not one of them")
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

absl::StatusOr<int> SchedulerCore::BackUpShares(const MemberRegistration& r) {
  const int rank = r.requested_rank;
  if (absl::Status s = CheckReachable(r, rank); !s.ok()) return s;
  const absl::Time died_at = shards_[rank].died_at;
  shards_[rank] = Member();
  ++shard_restarts_[rank];
  Admit(r, rank);
  shards_[rank].joined_as_backup = true;
  std::vector<std::string> backed;
  for (size_t share = 0; share < share_backups_.size(); ++share) {
    if (share_backups_[share] >= 0 || share_leaders_[share] == rank) continue;
    share_backups_[share] = rank;
    share_copied_[share] = 0;
    backed.push_back(absl::StrCat(share, " (led by shard ", share_leaders_[share], ")"));
  }
  notices_.push_back(absl::StrFormat(
      "shard %d is back (host %s, pid %d, at %s)%s; it backs up share%s %s, copying them from "
      "their leaders while training goes on (no roll back)",
      rank, r.host, r.pid, r.address,
      died_at == absl::Time() ? ""
                              : absl::StrFormat(" %.1f s after its death",
                                                absl::ToDoubleSeconds(clock_->Now() - died_at)),
      backed.size() == 1 ? "" : "s", backed.empty() ? "none" : absl::StrJoin(backed, ", ")));
  RecordShares();
  return rank;
}

void SchedulerCore::CopiesHeld(int shard, int64_t pid, absl::Span<const int> shares) {
  absl::MutexLock lock(&mu_);
  if (FindProcess(MemberRole::kShard, shard, pid) == nullptr) return;
  for (int share : shares) {
    if (share >= 0 && share < static_cast<int>(share_backups_.size()) &&
        share_backups_[share] == shard && !share_copied_[share]) {
      share_copied_[share] = 1;
      notices_.push_back(absl::StrCat("shard ", shard, " holds its copy of share ", share,
                                      " (led by shard ", share_leaders_[share], ")"));
      RecordShares();
    }
  }
}

void SchedulerCore::RecordShares() {
  if (journal_ == nullptr) return;
  JournalShares shares{share_leaders_, share_backups_,
                       std::vector<bool>(share_copied_.begin(), share_copied_.end()), {}};
  for (int rank = 0; rank < static_cast<int>(shards_.size()); ++rank) {
    if (shards_[rank].dead) shares.dead.push_back(rank);
  }
  Journalled(journal_->RecordShares(shares));
}

bool SchedulerCore::JoinedAsBackup(int shard) const {
  absl::MutexLock lock(&mu_);
  return shard >= 0 && shard < static_cast<int>(shards_.size()) &&
         shards_[shard].joined_as_backup;
}

bool SchedulerCore::ShardRestarting() const {
  for (const Member& s : shards_) {
    if (s.restarting) return true;
  }
  return false;
}

void SchedulerCore::PlaceShares() {
  if (spec_.shard_replicas < 2 || !share_leaders_.empty()) return;
  ShardsView placed;  // where rank 0 places the parts: by the addresses the shards registered
  placed.replicas = spec_.shard_replicas;
  for (const Member& s : shards_) placed.addresses.push_back(s.address);
  for (int share = 0; share < static_cast<int>(shards_.size()); ++share) {
    share_leaders_.push_back(share);
    share_backups_.push_back(placed.BackupOf(share));
    share_copied_.push_back(1);  // rank 0 gives each backup its copy before the job trains
  }
}

absl::StatusOr<std::string> SchedulerCore::HandOverShares(int rank) {
  for (size_t share = 0; share < share_leaders_.size(); ++share) {
    if (share_leaders_[share] != rank) continue;
    if (share_backups_[share] < 0) {
      return absl::DataLossError(absl::StrCat(
          "share ", share, " it led had no backup left (its backup died before it), so the "
          "job's only copy of it died with it; run with --checkpoint_every to resume from a "
          "checkpoint"));
    }
    if (!share_copied_[share]) {
      return absl::DataLossError(absl::StrCat(
          "share ", share, " it led was still being copied to its new backup, shard ",
          share_backups_[share], ", so the job's only copy of it died with it; run with "
          "--checkpoint_every to resume from a checkpoint"));
    }
  }
  std::vector<std::string> moved;
  int unbacked = 0;
  for (size_t share = 0; share < share_leaders_.size(); ++share) {
    if (share_leaders_[share] == rank) {
      share_leaders_[share] = share_backups_[share];
      share_backups_[share] = -1;
      moved.push_back(absl::StrCat(Describe(MemberRole::kShard, share_leaders_[share]),
                                   " leads share ", share));
    } else if (share_backups_[share] == rank) {
      share_backups_[share] = -1;
      ++unbacked;
    }
  }
  RecordShares();
  std::string said = moved.empty() ? std::string("it led no share")
                                   : absl::StrCat(absl::StrJoin(moved, ", "),
                                                  " from now on (no roll back)");
  if (unbacked > 0) {
    absl::StrAppend(&said, "; ", Count(unbacked, "share"),
                    " it backed up go on without a backup until a shard comes back");
  }
  return said;
}

}  // namespace cohort
