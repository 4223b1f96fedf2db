// SchedulerCore's cluster view: what a member learns once the job runs with every shard up
// (the shards' addresses and processes, the generation's workers, their hosts and host groups).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

absl::StatusOr<ClusterView> SchedulerCore::WaitForCluster() {
  absl::Notification settled;
  absl::StatusOr<ClusterView> view;
  WaitForClusterAsync([&](absl::StatusOr<ClusterView> v) {
    view = std::move(v);
    settled.Notify();
  });
  settled.WaitForNotification();
  return view;
}

void SchedulerCore::WaitForClusterAsync(ClusterDone done) {
  absl::MutexLock lock(&mu_);
  if (ClusterSettled()) return done(Cluster());
  cluster_waiters_.push_back(std::move(done));
}

bool SchedulerCore::ClusterSettled() const {
  return Ended() || (state_ == JobState::kRunning && !roster_.AnyShardRestarting());
}

absl::StatusOr<ClusterView> SchedulerCore::Cluster() const {
  if (state_ == JobState::kFailed) return absl::AbortedError(reason_);
  ClusterView view;
  view.shard_restart_grace = spec_.shard_restart_grace;
  view.generation = generation_;
  view.workers = active_;
  for (int rank : active_) view.worker_hosts.push_back(roster_.workers()[rank].host);
  view.host_groups = roster_.GroupsByHost(active_);
  for (int share = 0; share < static_cast<int>(roster_.shards().size()); ++share) {
    // A dead shard's share is where its backup took it.
    const int leader = shares_placed_.LeaderOf(share);
    const Member& at = roster_.shards()[leader];
    view.shard_addresses.push_back(at.address);
    view.shard_incarnations.push_back(absl::StrCat(
        leader != share ? absl::StrCat("led by shard ", leader, ": ") : "", at.host, " ", at.pid));
  }
  view.share_leaders = shares_placed_.leaders();
  view.share_backups = shares_placed_.backups();
  for (int backup : view.share_backups) {
    view.share_backup_addresses.push_back(backup >= 0 ? roster_.shards()[backup].address : "");
  }
  return view;
}

void SchedulerCore::AnswerClusterWaiters() {
  if (cluster_waiters_.empty() || !ClusterSettled()) return;
  std::vector<ClusterDone> waiters;
  waiters.swap(cluster_waiters_);
  const absl::StatusOr<ClusterView> view = Cluster();
  for (ClusterDone& w : waiters) w(view);
}

}  // namespace cohort
