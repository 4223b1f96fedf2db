#ifndef COHORT_TOOLS_LAUNCH_METRICS_TARGETS_H_
#define COHORT_TOOLS_LAUNCH_METRICS_TARGETS_H_

#include <string>
#include <vector>

#include "tools/launch/job_env.h"

namespace cohort::launch {

// One /metrics endpoint of a job.
struct MetricsTarget {
  std::string address;  // host:port
  std::string job_id;
  Role role = Role::kWorker;
  int rank = 0;
};

// A Prometheus file_sd list: one group per target, labelled job, role and rank, e.g.
//   [{"targets": ["127.0.0.1:9101"], "labels": {"job": "job-1", "role": "worker", "rank": "0"}}]
std::string FileSdTargets(const std::vector<MetricsTarget>& targets);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_METRICS_TARGETS_H_
