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
  return Ended() || (state_ == JobState::kRunning && !ShardRestarting());
}

absl::StatusOr<ClusterView> SchedulerCore::Cluster() const {
  if (state_ == JobState::kFailed) return absl::AbortedError(reason_);
  ClusterView view;
  view.shard_restart_grace = spec_.shard_restart_grace;
  view.generation = generation_;
  view.workers = active_;
  for (int rank : active_) view.worker_hosts.push_back(workers_[rank].host);
  view.host_groups = GroupsByHost();
  for (int share = 0; share < static_cast<int>(shards_.size()); ++share) {
    // A dead shard's share is where its backup took it.
    const int leader = shares_placed_.LeaderOf(share);
    const Member& at = shards_[leader];
    view.shard_addresses.push_back(at.address);
    view.shard_incarnations.push_back(absl::StrCat(
        leader != share ? absl::StrCat("led by shard ", leader, ": ") : "", at.host, " ", at.pid));
  }
  view.share_leaders = shares_placed_.leaders();
  view.share_backups = shares_placed_.backups();
  for (int backup : view.share_backups) {
    view.share_backup_addresses.push_back(backup >= 0 ? shards_[backup].address : "");
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

std::shared_ptr<const HostGroups> SchedulerCore::GroupsByHost() const {
  if (host_groups_ != nullptr) return host_groups_;
  absl::flat_hash_map<std::string, HostGroup> by_key;
  for (int rank : active_) {  // ascending: the first of a key leads it
    const std::string& key = workers_[rank].host_key;
    if (key.empty()) continue;
    ++by_key.try_emplace(key, HostGroup{rank, 0}).first->second.workers;
  }
  auto groups = std::make_shared<HostGroups>();
  groups->reserve(active_.size());
  for (int rank : active_) {
    const std::string& key = workers_[rank].host_key;
    (*groups)[rank] = key.empty() ? HostGroup{rank, 1} : by_key.at(key);
  }
  host_groups_ = std::move(groups);
  return host_groups_;
}

}  // namespace cohort
