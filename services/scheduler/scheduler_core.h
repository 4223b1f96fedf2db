#ifndef COHORT_SERVICES_SCHEDULER_SCHEDULER_CORE_H_
#define COHORT_SERVICES_SCHEDULER_SCHEDULER_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "services/common/clock.h"
#include "services/scheduler/barrier_round.h"
#include "services/scheduler/job_journal.h"
#include "services/scheduler/job_status.h"
#include "services/scheduler/member_roster.h"
#include "services/scheduler/share_placement.h"
#include "services/scheduler/straggler.h"
#include "trainer/kvstore/kvstore_mode.h"

namespace cohort {

// What the scheduler's metrics read at a scrape.
struct SchedulerSnapshot {
  JobState state = JobState::kForming;
  int members[kNumMemberRoles][kNumMemberStates] = {};  // by MemberRole, MemberState
  int64_t missed_heartbeats[kNumMemberRoles] = {};     // since the start, by MemberRole
  std::vector<absl::Duration> barrier_waits;  // of barriers released since the last snapshot
  // Since the start: barrier calls, and the workers' arrivals they brought (a call from a
  // host's meeting brings every worker there).
  int64_t barrier_calls = 0;
  int64_t barrier_arrivals = 0;
  std::optional<Straggler> straggler;          // with 2 or more workers reporting progress
};

// What the job is; fixed when the scheduler starts.
struct JobSpec {
  std::string job_id;
  int num_workers = 1;
  int num_shards = 1;
  KVStoreMode mode = KVStoreMode::kDistSync;
  // A member that has not sent a heartbeat for this long is dead and the job fails (fail-fast).
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  // How often members send one (the scheduler tells them when they register;
  // HeartbeatIntervalFor): a longer silence counts missed beats.
  absl::Duration heartbeat_interval = absl::Milliseconds(250);
  // The job fails if it has not formed (every member registered) within this.
  absl::Duration form_timeout = absl::Seconds(60);
  // How often the slowest worker is named (a notice) when it holds the others up by more
  // than straggler_share of the fastest one's compute, and by straggler_min_lag at least.
  absl::Duration straggler_report_interval = absl::Seconds(30);
  double straggler_share = 0.2;
  absl::Duration straggler_min_lag = absl::Milliseconds(5);  // and at least this a step
  // Zero: a shard's death fails the job. Else (launch --restart_failed_shards) the job waits
  // this long for the shard to register again under its rank, restarted from its checkpoint.
  absl::Duration shard_restart_grace = absl::ZeroDuration();
  // With a grace: a shard's death past this many restarts of its rank fails the job (0: none).
  int max_shard_restarts = 0;
  // Copies of every parameter part (--shard_replicas): 2, a backup on another shard.
  int shard_replicas = 1;
  // --on_worker_failure=elastic: a worker's death does not fail the job while min_workers
  // remain, and workers may join the running job up to max_workers (0: num_workers). Each
  // change starts a new membership generation.
  bool elastic = false;
  int min_workers = 1;
  int max_workers = 0;
};

// The heartbeat interval of a job of `members` shards and workers: 250 ms, longer in a large job
// so that the scheduler hears about 500 heartbeats a second at most (each costs it a read and a
// write of a stream, about 0.2 ms of a core: at a thousand members that is a tenth of a core),
// never more than a third of the timeout (a member is missed after two silent intervals at
// least) nor 5 s. Members wait two intervals for an answer before they give the scheduler up;
// a new generation and the job's end reach them at once, not with an answer.
absl::Duration HeartbeatIntervalFor(int members, absl::Duration timeout);
// The heartbeat timeout when none is asked for: 3 s, or three intervals of a job too large to
// beat more often (about 6.5 s at 1,088 members).
absl::Duration AutomaticHeartbeatTimeout(int members);

struct ClusterView {
  std::vector<std::string> shard_addresses;     // by shard rank
  std::vector<std::string> shard_incarnations;  // by shard rank: "host pid"
  absl::Duration shard_restart_grace;           // JobSpec's
  int64_t generation = 0;                       // the membership generation
  std::vector<int> workers;  // the generation's workers (their registered ranks), by rank in it
  // By rank in the generation: the host each worker registered from.
  std::vector<std::string> worker_hosts;
  // Replicated shards, by share (a shard rank's part of the model): the rank leading it, and
  // the rank backing it up (-1: none) with its address. Empty without replicas.
  std::vector<int> share_leaders;
  std::vector<int> share_backups;
  std::vector<std::string> share_backup_addresses;
  // Each worker's host group, by registered rank.
  std::shared_ptr<const HostGroups> host_groups;
};

// The scheduler's state machine, without gRPC: membership and ranks, the cluster spec,
// liveness, barriers, and the job's end (FORMING → RUNNING → DONE or FAILED). Every method is
// thread-safe; the blocking ones (WaitForCluster, Barrier) return early when the job ends.
// Liveness is judged on the injected clock; CheckLiveness must be called periodically.
class SchedulerCore {
 public:
  // journal (may be null; outlives the core): the workers that finished and the job's end are
  // recorded there before anyone is told; what it already holds is where this scheduler takes
  // the job over (the workers that finished need not join again; a job that ended stays so).
  SchedulerCore(JobSpec spec, Clock* clock, JobJournal* journal = nullptr);

  const JobSpec& spec() const { return spec_; }
  // A shard that came back into a job of replicated shards holds the copies of these shares
  // (its heartbeat says): it may lead them once their leader dies (pid as for Heartbeat).
  void CopiesHeld(int shard, int64_t pid, absl::Span<const int> shares);
  // Whether the shard at this rank came back into the running job as a backup of replicated
  // shards (it copies its shares from their leaders rather than waiting for rank 0).
  bool JoinedAsBackup(int shard) const;

  // Gives the member its rank. The job becomes RUNNING when every member has registered. While
  // it runs, a shard restarted after its death registers again under its rank (with
  // shard_restart_grace; a new process at the rank of a shard thought alive is its death), and
  // in an elastic job a worker joins under a new rank, starting a new generation.
  absl::StatusOr<int> Register(const MemberRegistration& member);
  // What the scheduler should say (once each) since the last call: a host whose workers run
  // more compute threads than it has cores.
  std::vector<std::string> TakeNotices();
  // Waits until the job is RUNNING with every shard up, or returns the reason it never will be.
  absl::StatusOr<ClusterView> WaitForCluster();
  // WaitForCluster without a thread waiting: `done` gets the view once the job runs with every
  // shard up (or at once). As BarrierAsync's `done`, it runs under the core's lock.
  using ClusterDone = std::function<void(absl::StatusOr<ClusterView>)>;
  void WaitForClusterAsync(ClusterDone done);
  // A heartbeat from a registered member (a worker's may carry its progress); returns the job
  // state to tell it. pid: the sending process (0: unknown); another process's is ignored.
  JobState Heartbeat(MemberRole role, int rank, const WorkerProgress* progress = nullptr,
                     int64_t pid = 0);
  // The member's control stream ended (detail: why, for the failure message). Before the
  // member said it stops, that is its death: the job fails at once (a shard's, unless it may
  // restart; a worker's in an elastic job, unless fewer than min_workers remain). pid as for Heartbeat: the end of a replaced process's stream is no news.
  void ControlStreamEnded(MemberRole role, int rank, const std::string& detail, int64_t pid = 0);
  // Blocks until every worker of the current generation has called Barrier with this name. A
  // non-zero fingerprint must match every other worker's (they all compute the partition map);
  // a mismatch fails the job. Returns the agreed fingerprint, or MembershipChangedError when
  // `generation` is not the current one or the generation moves on while it waits.
  absl::StatusOr<uint64_t> Barrier(int rank, const std::string& name, uint64_t fingerprint,
                                   int64_t generation = 0);
  // What passing a barrier gives each worker (barrier_round.h).
  using BarrierPassed = cohort::BarrierPassed;
  // A worker's arrival another worker of its host brings along with its own.
  struct Arrival {
    int rank = 0;
    std::string name;
    uint64_t fingerprint = 0;
  };
  // The most bytes the workers together bring to one barrier (its answer is one message).
  static constexpr size_t kMaxExchangeBytes = BarrierRound::kMaxExchangeBytes;
  // Barrier without a thread waiting, bringing `payload`, and arriving for `host_arrivals` too
  // (workers of this one's host that met it there): `done` gets its result once the
  // barrier releases (or at once). It runs under the core's lock, from whichever call released
  // the barrier: it must not call the core, only hand the result on (the service's reactor
  // finishes the call). Payloads past kMaxExchangeBytes together fail the job, saying so.
  using BarrierDone = BarrierRound::Done;
  void BarrierAsync(int rank, const std::string& name, uint64_t fingerprint, int64_t generation,
                    std::string payload, BarrierDone done,
                    absl::Span<const Arrival> host_arrivals = {});
  // Where a plain barrier's call from this worker of `generation`, bringing `host_arrivals`
  // others, is not counted: the worker shares its host key with others, and only their
  // leader's call bringing every other one is. The group it should meet there; none to count
  // the call (or answer it as BarrierAsync does: another generation, a worker not there).
  std::optional<HostGroup> MeetOnHostFirst(int rank, int64_t generation, size_t host_arrivals);
  // The membership generation: 0, moved on by each change of an elastic job's workers.
  int64_t generation() const;
  // Told each new generation and the job's end at once (the members then hear it without
  // waiting for their next heartbeat's answer). Set before any member registers; it runs under
  // the core's lock, as BarrierAsync's `done`: it must not call the core.
  using ChangeListener =
      std::function<void(JobState state, int64_t generation, const std::string& reason)>;
  void SetChangeListener(ChangeListener listener) { change_listener_ = std::move(listener); }
  // The member leaves: finished (error empty) or failed (the job fails with its error, unless
  // the job outlives that member's death: a restartable shard, an elastic job's worker). The
  // job is DONE when every worker has finished. A worker that finishes before it joined this
  // scheduler again (it took over a running job) counts as finished too.
  // lost_shard: the error is the loss of that shard (a worker's stream to it ended as a dead
  // shard's does). Until the shard is found dead, for at most the heartbeat timeout, the
  // verdict waits: a host's death is then blamed on the member that died there, not on the
  // worker elsewhere that noticed first; past that, the worker's error fails the job.
  void MemberStopped(MemberRole role, int rank, const std::string& error,
                     std::optional<int> lost_shard = std::nullopt);
  // Ends the job as FAILED with this reason (the scheduler itself was told to stop); members
  // learn it from their next heartbeat's answer.
  void Stop(const std::string& reason);
  // Fails the job if a member is silent past the heartbeat timeout or the job has not formed in
  // time; names the straggler (a notice) every straggler_report_interval while it holds the
  // others up.
  void CheckLiveness();
  // The slowest of the alive workers that reported progress (none with fewer than 2).
  std::optional<Straggler> FindStraggler() const;

  JobState state() const;
  // Why the job ended: for FAILED, one message naming the member, its host and its last error.
  std::string reason() const;
  // Blocks until the job has ended or timeout passed; true if it ended.
  bool WaitUntilEnded(absl::Duration timeout);
  // Blocks until no member's control stream is open (they saw the end and left) or timeout.
  bool WaitForMembersToLeave(absl::Duration timeout);
  // The job as the /status page shows it: id, state, reason, and every member with its state,
  // liveness and (workers) progress; StatusJson is its JSON (JobStatusJson).
  JobStatus Status() const;
  std::string StatusJson() const;
  // Counts for the metrics; takes the barrier waits recorded since the last call.
  SchedulerSnapshot TakeSnapshot();

 private:
  using Member = MemberRoster::Member;

  void Fail(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The member died (why: what showed it). A shard's backup leads its parts from now on in a
  // replicated job, or it waits to be restarted when the job allows it; anything else fails
  // the job.
  void Died(MemberRole role, int rank, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A restarted shard registers again under its rank: the workers roll back to its checkpoint,
  // or, with replicas, it backs up the shares that have no backup (BackUpShares).
  absl::StatusOr<int> Reregister(const MemberRegistration& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> BackUpShares(const MemberRegistration& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records who leads and backs up each share, and the dead shards, in the journal.
  void RecordShares() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a member in at `rank`; the job runs once every member is in.
  int Admit(const MemberRegistration& r, int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An elastic job's new worker: a new rank in a new generation.
  absl::StatusOr<int> Join(const MemberRegistration& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The workers changed (why: how): a new generation; a barrier in progress is not passed.
  void NewGeneration(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Active(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether WaitForCluster has its answer: the job ended, or runs with every shard up.
  bool ClusterSettled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ClusterView> Cluster() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once the cluster settled, every WaitForClusterAsync caller waiting gets its answer.
  void AnswerClusterWaiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportStraggler(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the worker may not arrive at barrier `name`: it is not one of the generation's.
  absl::Status CheckActive(int rank, const std::string& name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the worker's arrival at the barrier in progress; a different barrier or partition
  // map fails the job (Aborted with its reason).
  absl::Status Arrive(int rank, const std::string& name, uint64_t fingerprint)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Ended() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == JobState::kDone || state_ == JobState::kFailed;
  }
  // The job ends (journalled first); a later end changes nothing.
  void End(JobState state, std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // DONE once every worker of the generation has finished.
  void EndIfAllFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A journal that cannot be written is said once (a notice); the job goes on without it.
  void Journalled(const absl::Status& written) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the journal holds when this scheduler starts: the job as the one before left it.
  void TakeOver(const JournalState& journal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobSpec spec_;
  Clock* const clock_;
  JobJournal* const journal_;
  const absl::Time started_;

  mutable absl::Mutex mu_;
  JobState state_ ABSL_GUARDED_BY(mu_) = JobState::kForming;
  absl::Time straggler_reported_ ABSL_GUARDED_BY(mu_);  // last time one was named
  std::string reason_ ABSL_GUARDED_BY(mu_);
  // A worker's failure that is the loss of a shard not yet found dead (MemberStopped).
  struct HeldFailure {
    std::string reason;  // the verdict if the shard is not found dead by `until`
    int shard = 0;
    absl::Time until;
  };
  std::optional<HeldFailure> held_failure_ ABSL_GUARDED_BY(mu_);
  MemberRoster roster_ ABSL_GUARDED_BY(mu_);
  std::vector<int> shard_restarts_ ABSL_GUARDED_BY(mu_);  // by rank: how often it came back
  // Replicated shards: who leads and backs up each share.
  SharePlacement shares_placed_ ABSL_GUARDED_BY(mu_);
  // The membership generation, its workers (registered ranks, ascending: their ranks in it)
  // and what started it.
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> active_ ABSL_GUARDED_BY(mu_);
  std::string generation_why_ ABSL_GUARDED_BY(mu_);
  // The barrier in progress, and the barriers' counts.
  BarrierRound barrier_ ABSL_GUARDED_BY(mu_);
  std::vector<ClusterDone> cluster_waiters_ ABSL_GUARDED_BY(mu_);
  ChangeListener change_listener_;
  std::vector<std::string> notices_ ABSL_GUARDED_BY(mu_);
  bool journal_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SCHEDULER_CORE_H_
