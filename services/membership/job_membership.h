#ifndef COHORT_SERVICES_MEMBERSHIP_JOB_MEMBERSHIP_H_
#define COHORT_SERVICES_MEMBERSHIP_JOB_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cohort {

// Where the shards are and which processes they are, and this worker's place in the job's
// current membership generation.
struct ShardsView {
  std::vector<std::string> addresses;     // by shard rank, host:port
  std::vector<std::string> incarnations;  // by shard rank: "host pid"; another after a restart
  // How long the scheduler waits for a dead shard to come back (zero: a death fails the job).
  absl::Duration restart_grace;
  // The membership generation (an elastic job moves it on when its workers change), the
  // worker's rank in it (-1: not one of its workers) and how many workers it has.
  int64_t generation = 0;
  int rank = 0;
  int num_workers = 1;
  // By rank in the generation: the host each worker registered from.
  std::vector<std::string> worker_hosts;
  // Copies of every parameter part: 2 when each has a backup on another shard.
  int replicas = 1;
  // With replicas, by share (a shard rank's part of the model), as shards died and came back:
  // the rank leading it (addresses has its address) and the rank backing it up (-1: none),
  // with its address. Empty before the job runs.
  std::vector<int> share_leaders;
  std::vector<int> share_backups;
  std::vector<std::string> share_backup_addresses;

  // With replicas: the shard backing up the parts `shard` leads, the next one after it, in
  // rank order round the ring, on another host, or the next one where every shard shares a
  // host; -1 without replicas.
  int BackupOf(int shard) const;
};

// A barrier not passed because the job's workers changed (an elastic job): Aborted, carrying
// the generation the job moved on to. `why` says what changed.
absl::Status MembershipChangedError(int64_t generation, absl::string_view why);
// The generation a MembershipChangedError carries; none for any other status.
std::optional<int64_t> ChangedGeneration(const absl::Status& status);

// A failure that is the loss of a shard (its stream ended as a dead shard's does): the status,
// carrying that shard's rank, so the scheduler can name the dead shard rather than the worker
// that lost it. LostShard: the rank it carries; none for any other status.
absl::Status WithLostShard(absl::Status failure, int shard);
std::optional<int> LostShard(const absl::Status& status);

// What a worker's data path needs of its membership in a job (MemberSession in a process, a
// fake in tests): its place, the job-wide barrier, and word of the job's end. Thread-safe.
class JobMembership {
 public:
  virtual ~JobMembership() = default;

  virtual int rank() const = 0;
  virtual int num_workers() const = 0;
  // "worker 1": how messages name this member.
  virtual std::string name() const = 0;
  // Waits until every worker of `generation` reached the barrier `name`; returns the
  // fingerprint they agreed on (FailedPrecondition naming the ranks when they differ), or
  // MembershipChangedError when the job is (or moves) past that generation first.
  virtual absl::StatusOr<uint64_t> Barrier(const std::string& name, uint64_t fingerprint,
                                           int64_t generation = 0) = 0;
  // A barrier that gathers: once every worker of `generation` reached `name`, each gets what
  // every one brought (payload), by rank in the generation. Errors as Barrier's.
  virtual absl::StatusOr<std::vector<std::string>> Exchange(const std::string& name,
                                                            std::string payload,
                                                            int64_t generation = 0) = 0;
  // Calls f once when the job ends (at once, before returning, if it already has); f must not
  // block. Returns an id for RemoveEndListener.
  virtual int OnEnd(std::function<void()> f) = 0;
  // Calls f with the new generation each time the scheduler says the job's membership moved on
  // (an elastic job's workers changed); f must not block. Returns an id for RemoveEndListener.
  virtual int OnGenerationChange(std::function<void(int64_t)> f) = 0;
  // The generation the scheduler last spoke of (0 until an elastic job's workers change).
  virtual int64_t generation() const = 0;
  // After this returns, the listener is not running and will not be called.
  virtual void RemoveEndListener(int id) = 0;
  // OK while running and after DONE; why it ended otherwise.
  virtual absl::Status end_status() const = 0;
  // Waits until the job runs with every shard up (a dead one back), up to timeout; Aborted with
  // the reason when the job ends first, DeadlineExceeded after the timeout.
  virtual absl::StatusOr<ShardsView> WaitForShards(absl::Duration timeout) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_JOB_MEMBERSHIP_H_
