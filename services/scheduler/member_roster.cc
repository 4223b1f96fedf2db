#include "services/scheduler/member_roster.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/common/addresses.h"

namespace cohort {

MemberRoster::MemberRoster(int num_shards, int num_workers, absl::Duration heartbeat_interval)
    : heartbeat_interval_(heartbeat_interval), shards_(num_shards), workers_(num_workers) {}

MemberRoster::Member* MemberRoster::Find(MemberRole role, int rank) {
  std::vector<Member>& members = of(role);
  if (rank < 0 || rank >= static_cast<int>(members.size()) || !members[rank].registered) {
    return nullptr;
  }
  return &members[rank];
}

MemberRoster::Member* MemberRoster::FindProcess(MemberRole role, int rank, int64_t pid) {
  Member* m = Find(role, rank);
  return m != nullptr && (pid == 0 || m->pid == pid) ? m : nullptr;
}

std::string MemberRoster::Describe(MemberRole role, int rank) const {
  const Member& m = of(role)[rank];
  return absl::StrFormat("%s %d (host %s, pid %d)", RoleName(role), rank, m.host, m.pid);
}

MemberState MemberRoster::StateOf(const Member& m) {
  if (!m.registered) return MemberState::kMissing;
  if (m.dead) return MemberState::kDead;
  if (m.stopped) return MemberState::kStopped;
  return MemberState::kAlive;
}

void MemberRoster::Enroll(Member& m, const MemberRegistration& r, absl::Time now) {
  m.registered = true;
  m.host = r.host;
  m.host_key = r.host_key;
  host_groups_ = nullptr;
  m.pid = r.pid;
  m.address = r.address;
  m.threads = r.threads;
  m.cores = r.cores;
  m.last_heartbeat = now;
}

void MemberRoster::FinishedBefore(int worker, const std::string& host, int64_t pid,
                                  absl::Time now) {
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return;
  Member& m = workers_[worker];
  m.registered = m.stopped = true;
  m.host = host;
  m.pid = pid;
  m.last_heartbeat = now;
}

void MemberRoster::DeadBefore(int shard) {
  if (shard < 0 || shard >= static_cast<int>(shards_.size())) return;
  Member& m = shards_[shard];
  m.registered = m.dead = true;
  m.host = "(dead before this scheduler started)";
}

int MemberRoster::AddWorker() {
  workers_.emplace_back();
  return static_cast<int>(workers_.size()) - 1;
}

bool MemberRoster::AllRegistered() const {
  for (const auto* members : {&shards_, &workers_}) {
    for (const Member& m : *members) {
      if (!m.registered) return false;
    }
  }
  return true;
}

std::vector<std::string> MemberRoster::Unregistered() const {
  std::vector<std::string> missing;
  for (MemberRole role : {MemberRole::kShard, MemberRole::kWorker}) {
    const std::vector<Member>& ms = of(role);
    for (size_t r = 0; r < ms.size(); ++r) {
      if (!ms[r].registered) missing.push_back(absl::StrCat(RoleName(role), " ", r));
    }
  }
  return missing;
}

bool MemberRoster::AnyStreamOpen() const {
  for (const auto* members : {&shards_, &workers_}) {
    for (const Member& m : *members) {
      if (m.stream_open) return true;
    }
  }
  return false;
}

bool MemberRoster::AnyShardRestarting() const {
  for (const Member& s : shards_) {
    if (s.restarting) return true;
  }
  return false;
}

std::vector<int> MemberRoster::DeadShards() const {
  std::vector<int> dead;
  for (int rank = 0; rank < static_cast<int>(shards_.size()); ++rank) {
    if (shards_[rank].dead) dead.push_back(rank);
  }
  return dead;
}

void MemberRoster::Heard(MemberRole role, Member& m, absl::Time now,
                         const WorkerProgress* progress) {
  CountMissedHeartbeats(role, m, now);
  m.last_heartbeat = now;
  m.missed_in_silence = 0;
  m.stream_open = true;
  if (progress != nullptr) {
    m.has_progress = true;
    m.progress = *progress;
  }
}

void MemberRoster::CountMissedHeartbeats(MemberRole role, Member& m, absl::Time now) {
  // The beats that should have come since the last one, less the one that may be on its way.
  absl::Duration rest;
  const int64_t missed = absl::IDivDuration(now - m.last_heartbeat, heartbeat_interval_, &rest) - 1;
  if (missed <= m.missed_in_silence) return;
  missed_heartbeats_[static_cast<int>(role)] += missed - m.missed_in_silence;
  m.missed_in_silence = missed;
}

absl::Status MemberRoster::CheckReachable(const MemberRegistration& r, int rank) const {
  if (r.host.empty()) return absl::OkStatus();
  auto loopback = [](const std::string& address) {
    return !address.empty() && IsLoopbackAddress(HostOfAddress(address));
  };
  for (MemberRole role : {MemberRole::kShard, MemberRole::kWorker}) {
    const std::vector<Member>& members = of(role);
    for (size_t i = 0; i < members.size(); ++i) {
      const Member& m = members[i];
      if (!m.registered || m.dead || m.host.empty() || m.host == r.host) continue;
      if (r.role == MemberRole::kShard && loopback(r.address)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "shard ", rank, " on host ", r.host, " would be dialled at ", r.address,
            ", a loopback address, but ", Describe(role, static_cast<int>(i)),
            " is on another host: start the shard with --advertise_address=<an address of ", r.host,
            " the other hosts reach>"));
      }
      if (role == MemberRole::kShard && loopback(m.address)) {
        return absl::FailedPreconditionError(
            absl::StrCat(RoleName(r.role), " ", rank, " on host ", r.host, " could not reach ",
                         Describe(role, static_cast<int>(i)), " at ", m.address,
                         ", a loopback address of its host: restart that shard with "
                         "--advertise_address=<an address of ",
                         m.host, " the other hosts reach>"));
      }
    }
  }
  return absl::OkStatus();
}

std::optional<std::string> MemberRoster::OversubscribedNotice(const std::string& host) {
  if (oversubscribed_hosts_.contains(host)) return std::nullopt;
  int threads = 0, cores = 0;
  std::vector<std::string> ranks;
  for (size_t r = 0; r < workers_.size(); ++r) {
    const Member& w = workers_[r];
    if (!w.registered || w.host != host || w.threads <= 0) continue;
    threads += w.threads;
    cores = std::max(cores, w.cores);
    ranks.push_back(absl::StrCat(r));
  }
  if (ranks.size() < 2 || cores <= 0 || threads <= cores) return std::nullopt;
  oversubscribed_hosts_.insert(host);
  return absl::StrCat("host ", host, ": workers ", absl::StrJoin(ranks, ", "), " run ", threads,
                      " compute threads on its ", cores,
                      " cores and will slow each other down; give each ",
                      "OMP_NUM_THREADS=", std::max<size_t>(1, cores / ranks.size()),
                      " (the launcher does), or start fewer workers there");
}

std::optional<Straggler> MemberRoster::Slowest() const {
  std::vector<WorkerPace> paces;
  for (size_t r = 0; r < workers_.size(); ++r) {
    const Member& w = workers_[r];
    if (!w.has_progress || StateOf(w) != MemberState::kAlive) continue;
    paces.push_back({static_cast<int>(r), w.host, w.progress});
  }
  return SlowestWorker(paces);
}

std::shared_ptr<const HostGroups> MemberRoster::GroupsByHost(absl::Span<const int> active) const {
  if (host_groups_ != nullptr) return host_groups_;
  absl::flat_hash_map<std::string, HostGroup> by_key;
  for (int rank : active) {  // ascending: the first of a key leads it
    const std::string& key = workers_[rank].host_key;
    if (key.empty()) continue;
    ++by_key.try_emplace(key, HostGroup{rank, 0}).first->second.workers;
  }
  auto groups = std::make_shared<HostGroups>();
  groups->reserve(active.size());
  for (int rank : active) {
    const std::string& key = workers_[rank].host_key;
    (*groups)[rank] = key.empty() ? HostGroup{rank, 1} : by_key.at(key);
  }
  host_groups_ = std::move(groups);
  return host_groups_;
}

std::vector<MemberStatus> MemberRoster::Statuses(absl::Time now) const {
  std::vector<MemberStatus> statuses;
  for (MemberRole role : {MemberRole::kShard, MemberRole::kWorker}) {
    const std::vector<Member>& ms = of(role);
    for (size_t r = 0; r < ms.size(); ++r) {
      const Member& m = ms[r];
      statuses.push_back({role, static_cast<int>(r), StateOf(m), m.host, m.pid, m.address,
                          m.registered ? absl::ToDoubleSeconds(now - m.last_heartbeat) : -1.0,
                          m.last_error,
                          m.has_progress ? std::make_optional(m.progress) : std::nullopt});
    }
  }
  return statuses;
}

}  // namespace cohort
