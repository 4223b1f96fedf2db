#ifndef COHORT_SERVICES_SCHEDULER_MEMBER_ROSTER_H_
#define COHORT_SERVICES_SCHEDULER_MEMBER_ROSTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "services/scheduler/job_status.h"
#include "services/scheduler/straggler.h"

namespace cohort {

struct MemberRegistration {
  MemberRole role = MemberRole::kWorker;
  int requested_rank = -1;  // -1: the lowest free rank
  std::string host;         // for messages
  int64_t pid = 0;
  std::string address;  // shards: host:port workers dial
  int threads = 0;      // workers: compute threads (0: unknown)
  int cores = 0;        // workers: their host's cores (0: unknown)
  // Workers: the kernel, network and user namespaces and Unix user they run as; those sharing
  // one meet at a barrier on their host first (empty: alone).
  std::string host_key;
  // A member of the running job registering again (its control stream broke): the same process
  // keeps its place; a scheduler restarted mid-job admits it while it forms again.
  bool rejoin = false;
};

// The workers of a generation sharing a host key (they meet at a barrier on their host first):
// the lowest rank of them, which arrives for them all, and how many they are.
struct HostGroup {
  int leader = 0;
  int workers = 1;
};
using HostGroups = absl::flat_hash_map<int, HostGroup>;  // by registered rank

// The job's members as the scheduler knows them: its shards and workers by rank, what each
// registered with, how alive it is (its last heartbeat, the beats it missed, its control
// stream, whether it stopped, died or is restarting) and its progress; and what is asked of
// them together (who is missing, whether all are in, whether a stream is still open, the
// slowest worker, the host groups, whether a new member could reach them, an oversubscribed
// host). It holds no lock: SchedulerCore keeps it under its own, and decides what a member's
// death or departure does to the job.
class MemberRoster {
 public:
  struct Member {
    bool registered = false;
    std::string host;
    std::string host_key;
    int64_t pid = 0;
    std::string address;
    int threads = 0;
    int cores = 0;
    absl::Time last_heartbeat;
    bool stream_open = false;
    bool stopped = false;
    std::string stream_end;  // why its control stream ended, if it did
    std::string last_error;
    bool dead = false;
    int64_t missed_in_silence = 0;  // missed heartbeats counted since the last one
    bool has_progress = false;
    WorkerProgress progress;
    // A shard that died and may come back (shard_restart_grace): since when, and why.
    bool restarting = false;
    absl::Time died_at;
    std::string death;
    // Replicated shards: it came back into the running job as a backup (it leads nothing).
    bool joined_as_backup = false;
  };

  // heartbeat_interval: how often members beat (a longer silence counts missed beats).
  MemberRoster(int num_shards, int num_workers, absl::Duration heartbeat_interval);

  // By rank (registered or not).
  std::vector<Member>& of(MemberRole role) {
    return role == MemberRole::kShard ? shards_ : workers_;
  }
  const std::vector<Member>& of(MemberRole role) const {
    return role == MemberRole::kShard ? shards_ : workers_;
  }
  std::vector<Member>& shards() { return shards_; }
  const std::vector<Member>& shards() const { return shards_; }
  std::vector<Member>& workers() { return workers_; }
  const std::vector<Member>& workers() const { return workers_; }
  // The registered member at (role, rank); else null.
  Member* Find(MemberRole role, int rank);
  // The registered member at (role, rank) when pid is 0 or its process's; else null.
  Member* FindProcess(MemberRole role, int rank, int64_t pid);
  // "worker 1 (host h, pid 42)".
  std::string Describe(MemberRole role, int rank) const;
  static MemberState StateOf(const Member& m);

  // The registration's process takes the member's place (heard from at `now`).
  void Enroll(Member& m, const MemberRegistration& r, absl::Time now);
  // What a scheduler taking the job over reads in its journal: a worker that finished (it
  // need not join again), a replicated shard that died (it will not register). Ranks outside
  // the job are ignored.
  void FinishedBefore(int worker, const std::string& host, int64_t pid, absl::Time now);
  void DeadBefore(int shard);
  // An elastic job's new worker: its rank, not registered yet.
  int AddWorker();
  // Whether every shard and worker has registered.
  bool AllRegistered() const;
  // "shard 1", "worker 0": the members that have not registered.
  std::vector<std::string> Unregistered() const;
  // Whether a member's control stream is still open.
  bool AnyStreamOpen() const;
  // Whether a shard died and may still come back.
  bool AnyShardRestarting() const;
  // The ranks of the dead shards, ascending.
  std::vector<int> DeadShards() const;

  // A heartbeat from m at `now`, with the worker's progress (may be null).
  void Heard(MemberRole role, Member& m, absl::Time now, const WorkerProgress* progress);
  // Counts the beats m missed by `now` (each once, however often this is asked).
  void CountMissedHeartbeats(MemberRole role, Member& m, absl::Time now);
  // Since the start, by role.
  int64_t missed_heartbeats(MemberRole role) const {
    return missed_heartbeats_[static_cast<int>(role)];
  }

  // Refuses a registration that would leave a shard reachable only at a loopback address in a
  // job whose members are on more than one host.
  absl::Status CheckReachable(const MemberRegistration& r, int rank) const;
  // After a worker on `host` registered: what to say (once a host) if the workers there now
  // run more compute threads than it has cores.
  std::optional<std::string> OversubscribedNotice(const std::string& host);
  // The slowest of the alive workers that reported progress (none with fewer than 2).
  std::optional<Straggler> Slowest() const;
  // The `active` workers (registered ranks, ascending) grouped by host key; kept until a
  // member enrolls or ForgetHostGroups (a new generation).
  std::shared_ptr<const HostGroups> GroupsByHost(absl::Span<const int> active) const;
  void ForgetHostGroups() { host_groups_ = nullptr; }
  // Every member as /status shows it, shards then workers, at `now`.
  std::vector<MemberStatus> Statuses(absl::Time now) const;

 private:
  const absl::Duration heartbeat_interval_;
  std::vector<Member> shards_;
  std::vector<Member> workers_;  // by registered rank
  int64_t missed_heartbeats_[kNumMemberRoles] = {};
  absl::flat_hash_set<std::string> oversubscribed_hosts_;
  mutable std::shared_ptr<const HostGroups> host_groups_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_MEMBER_ROSTER_H_
