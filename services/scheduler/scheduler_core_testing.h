#ifndef COHORT_SERVICES_SCHEDULER_SCHEDULER_CORE_TESTING_H_
#define COHORT_SERVICES_SCHEDULER_SCHEDULER_CORE_TESTING_H_

#include <string>

#include "gtest/gtest.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

// For SchedulerCore's tests: a job's spec, a member's registration, and the job formed.

// Job "job-test" with `workers` workers and `shards` shards.
inline JobSpec Spec(int workers, int shards) {
  JobSpec s;
  s.job_id = "job-test";
  s.num_workers = workers;
  s.num_shards = shards;
  return s;
}

// A member asking for `rank` (-1: the lowest free), on host-<rank> with pid 1000 + rank.
inline MemberRegistration Member(MemberRole role, int rank, const std::string& address = "") {
  MemberRegistration r;
  r.role = role;
  r.requested_rank = rank;
  r.host = "host-" + std::to_string(rank);
  r.pid = 1000 + rank;
  r.address = address;
  return r;
}

// Registers S shards and W workers with their own ranks.
inline void Form(SchedulerCore* core) {
  for (int s = 0; s < core->spec().num_shards; ++s) {
    ASSERT_TRUE(core->Register(Member(MemberRole::kShard, s, "10.0.0." + std::to_string(s) + ":7")).ok());
  }
  for (int w = 0; w < core->spec().num_workers; ++w) {
    ASSERT_TRUE(core->Register(Member(MemberRole::kWorker, w)).ok());
  }
}

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SCHEDULER_CORE_TESTING_H_
