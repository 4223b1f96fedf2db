// ShardCore's replication: a part's leader forwards each update to the part's backup and
// answers the workers once the backup holds it; the backup makes the same update with its own
// copy of the update rule, and, once it leads the part, answers the pushes it held already.

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/shard/shard_core.h"
#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status ShardCore::SetBackup(PartId id, BackupLink* link) {
  ASSIGN_OR_RETURN(ShardPart * p, FindPart(id, "backup"));
  absl::MutexLock lock(&p->mu);
  p->backup = link;
  p->backed_up_version = p->version;  // rank 0 initialised both alike
  return absl::OkStatus();
}

absl::Status ShardCore::AddBackup(absl::Span<const PartId> parts, int share, BackupLink* link,
                                  std::function<void()> copied) {
  std::vector<ShardPart*> found;
  for (PartId id : parts) {
    ASSIGN_OR_RETURN(ShardPart * p, FindPart(id, "copy"));
    found.push_back(p);
  }
  if (found.empty()) {
    copied();
    return absl::OkStatus();
  }
  auto left = std::make_shared<std::atomic<size_t>>(found.size());
  auto done = std::make_shared<std::function<void()>>(std::move(copied));
  for (ShardPart* p : found) {
    absl::MutexLock lock(&p->mu);
    const PartCopy copy = p->CopyOf(share);
    // Under the part's lock: its next update is forwarded after the copy, to the same link.
    p->backup = link;
    p->backed_up_version = -1;
    const int64_t version = p->version;
    link->Forward(LeaderUpdate{p->id, version, 0, p->value->data, -1, 0, &copy},
                  [p, version, left, done] {
                    p->SendHeldAnswers(version);
                    if (left->fetch_sub(1) == 1) (*done)();
                  });
  }
  return absl::OkStatus();
}

void ShardCore::DropBackupLink(const BackupLink* link) {
  absl::ReaderMutexLock lock(&mu_);
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    if (p->backup == link) p->backup = nullptr;
  }
}

void ShardCore::DropBackups() {
  absl::ReaderMutexLock lock(&mu_);
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    p->backup = nullptr;
  }
}

absl::Status ShardCore::TakeCopy(const LeaderUpdate& u) {
  const std::string where = absl::StrCat("shard ", shard_rank_.load(), ": the copy of key ",
                                         u.id.key, " part ", u.id.part, " at version ", u.version);
  ShardPart* p = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " came before the job's settings"));
    }
    auto it = parts_.find(u.id);
    if (it == parts_.end()) {
      it = parts_.emplace(u.id, NewPart(u.id, u.copy->share)).first;
      ++expected_parts_;
    }
    p = it->second.get();
  }
  absl::MutexLock lock(&p->mu);
  return p->TakeCopy(u, where);
}

absl::Status ShardCore::ApplyLeaderUpdate(const LeaderUpdate& u) {
  if (u.copy != nullptr) return TakeCopy(u);
  ASSIGN_OR_RETURN(ShardPart * p, FindPart(u.id, "the leader's update"));
  absl::MutexLock lock(&p->mu);
  // Only for a refusal: built for every update, the words would cost more than the update.
  RETURN_IF_ERROR(p->TakeUpdate(u, [&] {
    return absl::StrCat("shard ", shard_rank_.load(), ": the update of key ", u.id.key, " part ",
                        u.id.part, " to version ", u.version);
  }));
  Applied(p->version, 0);  // the version only: no push of a worker came here
  MaybeCheckpoint(p);
  return absl::OkStatus();
}

}  // namespace cohort
