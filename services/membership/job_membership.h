#ifndef COHORT_SERVICES_MEMBERSHIP_JOB_MEMBERSHIP_H_
#define COHORT_SERVICES_MEMBERSHIP_JOB_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cohort {

// Where the shards are and which processes they are.
struct ShardsView {
  std::vector<std::string> addresses;     // by shard rank, host:port
  std::vector<std::string> incarnations;  // by shard rank: "host pid"; another after a restart
  // How long the scheduler waits for a dead shard to come back (zero: a death fails the job).
  absl::Duration restart_grace;
};

// What a worker's data path needs of its membership in a job (MemberSession in a process, a
// fake in tests): its place, the job-wide barrier, and word of the job's end. Thread-safe.
class JobMembership {
 public:
  virtual ~JobMembership() = default;

  virtual int rank() const = 0;
  virtual int num_workers() const = 0;
  // "worker 1": how messages name this member.
  virtual std::string name() const = 0;
  // Waits until every worker reached the barrier `name`; returns the fingerprint they agreed
  // on (FailedPrecondition naming the ranks when they differ).
  virtual absl::StatusOr<uint64_t> Barrier(const std::string& name, uint64_t fingerprint) = 0;
  // Calls f once when the job ends (at once, before returning, if it already has); f must not
  // block. Returns an id for RemoveEndListener.
  virtual int OnEnd(std::function<void()> f) = 0;
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
