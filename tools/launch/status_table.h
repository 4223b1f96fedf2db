#ifndef COHORT_TOOLS_LAUNCH_STATUS_TABLE_H_
#define COHORT_TOOLS_LAUNCH_STATUS_TABLE_H_

#include <string>

#include "absl/status/statusor.h"

namespace cohort::launch {

// The scheduler's /status JSON as the terminal table `launch --status` prints: a line for the
// job (state, size, mode, age, images/sec; why it ended, once it has), then one row per member
// with its state, host, and for workers step, epoch, images/sec, step time, comm share and
// loss. InvalidArgument when the text is not a status page.
absl::StatusOr<std::string> StatusTable(const std::string& status_json);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_STATUS_TABLE_H_
