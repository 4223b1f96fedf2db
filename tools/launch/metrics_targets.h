#ifndef COHORT_TOOLS_LAUNCH_METRICS_TARGETS_H_
#define COHORT_TOOLS_LAUNCH_METRICS_TARGETS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/job_env.h"

namespace cohort::launch {

// The port a process wrote to `path` (once listening; written, then renamed into place):
// nullopt while the file is not there; an error naming the file when it holds no port number.
absl::StatusOr<std::optional<int>> ReadPortFile(const std::string& path);

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

// Writes text to path through a temporary file beside it and a rename, so a reader (Prometheus
// watching it) never sees half of it.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_METRICS_TARGETS_H_
