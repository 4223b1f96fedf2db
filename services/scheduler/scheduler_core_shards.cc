// SchedulerCore and dead shards: one that registers again after a restart, and, in a job of
// replicated shards, one that comes back as a backup (who leads and backs up each share is
// SharePlacement's).

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

absl::StatusOr<int> SchedulerCore::Reregister(const MemberRegistration& r) {
  const int rank = r.requested_rank;
  const bool known = rank >= 0 && rank < static_cast<int>(roster_.shards().size());
  if (known && shares_placed_.placed() && roster_.shards()[rank].dead &&
      !roster_.shards()[rank].restarting) {
    return BackUpShares(r);
  }
  if (!known || !roster_.shards()[rank].restarting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", spec_.job_id, " is RUNNING; a shard joins it only to take the place of a dead "
        "one, under its --rank, with launch --restart_failed_shards (",
        rank < 0  ? "no rank"
        : !known  ? absl::StrCat("it has ", roster_.shards().size(), " shards, ranks 0..",
                                 roster_.shards().size() - 1, "; shard ", rank,
                                 " is not one of them")
                  : absl::StrCat("shard ", rank, " is not dead"),
        ")"));
  }
  if (absl::Status s = roster_.CheckReachable(r, rank); !s.ok()) return s;
  Member& m = roster_.shards()[rank];
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
  if (absl::Status s = roster_.CheckReachable(r, rank); !s.ok()) return s;
  const absl::Time died_at = roster_.shards()[rank].died_at;
  roster_.shards()[rank] = Member();
  ++shard_restarts_[rank];
  Admit(r, rank);
  roster_.shards()[rank].joined_as_backup = true;
  const std::vector<std::string> backed = shares_placed_.BackUpUnbacked(rank);
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
  if (roster_.FindProcess(MemberRole::kShard, shard, pid) == nullptr) return;
  for (int share : shares) {
    if (shares_placed_.CopyHeld(shard, share)) {
      notices_.push_back(absl::StrCat("shard ", shard, " holds its copy of share ", share,
                                      " (led by shard ", shares_placed_.LeaderOf(share), ")"));
      RecordShares();
    }
  }
}

void SchedulerCore::RecordShares() {
  if (journal_ == nullptr) return;
  Journalled(journal_->RecordShares(shares_placed_.ToJournal(roster_.DeadShards())));
}

bool SchedulerCore::JoinedAsBackup(int shard) const {
  absl::MutexLock lock(&mu_);
  return shard >= 0 && shard < static_cast<int>(roster_.shards().size()) &&
         roster_.shards()[shard].joined_as_backup;
}

}  // namespace cohort
