#include "services/scheduler/share_placement.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/count_text.h"
#include "services/membership/job_membership.h"

namespace cohort {

void SharePlacement::Place(absl::Span<const std::string> addresses, int replicas) {
  if (replicas < 2 || placed()) return;
  ShardsView view;  // where rank 0 places the parts: by the addresses the shards registered
  view.replicas = replicas;
  view.addresses.assign(addresses.begin(), addresses.end());
  for (int share = 0; share < static_cast<int>(addresses.size()); ++share) {
    leaders_.push_back(share);
    backups_.push_back(view.BackupOf(share));
    copied_.push_back(1);  // rank 0 gives each backup its copy before the job trains
  }
}

void SharePlacement::Restore(const JournalShares& shares) {
  leaders_ = shares.leaders;
  backups_ = shares.backups;
  copied_.assign(shares.copied.begin(), shares.copied.end());
}

absl::StatusOr<std::string> SharePlacement::HandOver(
    int rank, const std::function<std::string(int)>& describe) {
  for (size_t share = 0; share < leaders_.size(); ++share) {
    if (leaders_[share] != rank) continue;
    if (backups_[share] < 0) {
      return absl::DataLossError(absl::StrCat(
          "share ", share, " it led had no backup left (its backup died before it), so the "
          "job's only copy of it died with it; run with --checkpoint_every to resume from a "
          "checkpoint"));
    }
    if (!copied_[share]) {
      return absl::DataLossError(absl::StrCat(
          "share ", share, " it led was still being copied to its new backup, shard ",
          backups_[share], ", so the job's only copy of it died with it; run with "
          "--checkpoint_every to resume from a checkpoint"));
    }
  }
  std::vector<std::string> moved;
  int unbacked = 0;
  for (size_t share = 0; share < leaders_.size(); ++share) {
    if (leaders_[share] == rank) {
      leaders_[share] = backups_[share];
      backups_[share] = -1;
      moved.push_back(absl::StrCat(describe(leaders_[share]), " leads share ", share));
    } else if (backups_[share] == rank) {
      backups_[share] = -1;
      ++unbacked;
    }
  }
  std::string said = moved.empty() ? std::string("it led no share")
                                   : absl::StrCat(absl::StrJoin(moved, ", "),
                                                  " from now on (no roll back)");
  if (unbacked > 0) {
    absl::StrAppend(&said, "; ", Count(unbacked, "share"),
                    " it backed up go on without a backup until a shard comes back");
  }
  return said;
}

std::vector<std::string> SharePlacement::BackUpUnbacked(int rank) {
  std::vector<std::string> backed;
  for (size_t share = 0; share < backups_.size(); ++share) {
    if (backups_[share] >= 0 || leaders_[share] == rank) continue;
    backups_[share] = rank;
    copied_[share] = 0;
    backed.push_back(absl::StrCat(share, " (led by shard ", leaders_[share], ")"));
  }
  return backed;
}

bool SharePlacement::CopyHeld(int shard, int share) {
  if (share < 0 || share >= static_cast<int>(backups_.size()) || backups_[share] != shard ||
      copied_[share]) {
    return false;
  }
  copied_[share] = 1;
  return true;
}

JournalShares SharePlacement::ToJournal(std::vector<int> dead) const {
  return JournalShares{leaders_, backups_, std::vector<bool>(copied_.begin(), copied_.end()),
                       std::move(dead)};
}

}  // namespace cohort
