#ifndef COHORT_TOOLS_LAUNCH_CHECKPOINT_REPORT_H_
#define COHORT_TOOLS_LAUNCH_CHECKPOINT_REPORT_H_

#include <string>

#include "absl/time/time.h"

namespace cohort::launch {

// The launcher's last word on a job's checkpoints under root (a job of num_shards shards): the
// newest complete one and how long before `end` it was written, so that a job whose later
// checkpoints failed (a full disk) does not end without saying that its newest one is old.
// Files are checked by their sizes (a resume reads every byte).
std::string NewestCheckpointReport(const std::string& root, int num_shards, absl::Time end);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_CHECKPOINT_REPORT_H_
