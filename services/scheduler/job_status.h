#ifndef COHORT_SERVICES_SCHEDULER_JOB_STATUS_H_
#define COHORT_SERVICES_SCHEDULER_JOB_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/scheduler/straggler.h"
#include "trainer/kvstore/kvstore_mode.h"

namespace cohort {

enum class MemberRole { kShard, kWorker };
enum class JobState { kForming, kRunning, kDone, kFailed };
// missing: not registered yet; alive: registered and heard from within the deadline; stopped:
// left the job (finished, or told to stop); dead: died or failed.
enum class MemberState { kMissing, kAlive, kStopped, kDead };
constexpr int kNumMemberRoles = 2;
constexpr int kNumJobStates = 4;
constexpr int kNumMemberStates = 4;

const char* RoleName(MemberRole role);
const char* JobStateName(JobState state);
const char* MemberStateName(MemberState state);

// A member as /status shows it.
struct MemberStatus {
  MemberRole role = MemberRole::kWorker;
  int rank = 0;
  MemberState state = MemberState::kMissing;
  std::string host;
  int64_t pid = 0;
  std::string address;
  double seconds_since_heartbeat = -1;  // -1: never registered
  std::string last_error;
  std::optional<WorkerProgress> progress;  // a worker's, once it reported some
};

// The job as /status shows it.
struct JobStatus {
  std::string job_id;
  JobState state = JobState::kForming;
  std::string reason;
  KVStoreMode mode = KVStoreMode::kDistSync;
  int64_t generation = 0;
  std::vector<int> workers;  // the ranks of the current generation's workers
  int num_shards = 0;
  double seconds_since_start = 0;
  std::vector<MemberStatus> members;  // shards, then workers, by rank
  std::optional<Straggler> straggler;
};

// The job's progress as its workers last reported it.
struct JobProgress {
  int64_t step = 0;         // the furthest worker's steps done
  int64_t total_steps = 0;  // of the whole run; 0: not reported yet
  double images_per_second = 0;  // the sum over the alive workers
  double loss = 0;               // their mean
  double communication_overhead = 0;  // their mean (0..1)
  int reporting = 0;                  // alive workers with progress
  // Until the last step at the pace of the slowest alive worker; nullopt: unknown.
  std::optional<double> eta_seconds;
  std::optional<double> test_top1;  // percent, the latest evaluation
};
JobProgress SummarizeProgress(const JobStatus& status);

// The scheduler's /status document (the launcher's --status prints it as a table): the job,
// every member, and the job's progress (SummarizeProgress: "images_per_second", "step",
// "total_steps", "eta_seconds" and "test_top1", the last two null when unknown).
std::string JobStatusJson(const JobStatus& status);

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_JOB_STATUS_H_
