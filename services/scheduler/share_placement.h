#ifndef COHORT_SERVICES_SCHEDULER_SHARE_PLACEMENT_H_
#define COHORT_SERVICES_SCHEDULER_SHARE_PLACEMENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/scheduler/job_journal.h"

namespace cohort {

// Who leads and who backs up each share (a shard rank's part of the model) in a job of
// replicated shards (--shard_replicas 2), as shards die and come back. When the job starts,
// every share is led by its own shard and backed up by the next one round the ring on another
// host (ShardsView::BackupOf), which rank 0 gives its copy. A dead leader's shares go to their
// backups (no roll back), unless a backup does not hold its copy yet: then the job's only copy
// died, and the hand-over is refused. A shard that comes back backs up every share left
// without a backup, copying them from their leaders while training goes on; it holds them once
// it says so. gRPC-free and lock-free: the scheduler core owns it and calls it under its lock.
class SharePlacement {
 public:
  // Whether shares are placed (a job with replicas, once it runs or as its journal says).
  bool placed() const { return !leaders_.empty(); }
  // The job starts running: its shards at these addresses (by rank) place their shares.
  // Nothing happens when replicas < 2 or the shares are placed already.
  void Place(absl::Span<const std::string> addresses, int replicas);
  // The shares as a scheduler before this one left them (its journal).
  void Restore(const JournalShares& shares);

  // By share: the rank leading it (its own without replicas), the rank backing it up (-1:
  // none).
  int LeaderOf(int share) const { return placed() ? leaders_[share] : share; }
  const std::vector<int>& leaders() const { return leaders_; }
  const std::vector<int>& backups() const { return backups_; }

  // Dead shard `rank`: the shares it led go to their backups, and those it backed up go on
  // without one. Returns what changed, naming each new leader by describe(rank); DataLoss
  // saying why, with nothing moved, when a share it led has no backup holding its copy.
  absl::StatusOr<std::string> HandOver(int rank,
                                       const std::function<std::string(int)>& describe);
  // Shard `rank` came back: it backs up every share without a backup that it does not lead.
  // Returns them as "<share> (led by shard <leader>)".
  std::vector<std::string> BackUpUnbacked(int rank);
  // The backup `shard` holds its copy of `share`: true when that is news (it backs the share
  // up and had not said so).
  bool CopyHeld(int shard, int share);

  // For the journal (dead: the dead shards, which it records beside the shares).
  JournalShares ToJournal(std::vector<int> dead) const;

 private:
  std::vector<int> leaders_;  // by share
  std::vector<int> backups_;  // by share; -1: none
  std::vector<char> copied_;  // by share: its backup holds the copy
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SHARE_PLACEMENT_H_
