#ifndef COHORT_TOOLS_LAUNCH_DATA_SYNC_H_
#define COHORT_TOOLS_LAUNCH_DATA_SYNC_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/hosts.h"

namespace cohort::launch {

// What `launch --sync_dst_dir DIR` copies of the workers' data (--dataset imagefolder:,
// recordio:, tfrecord: outside the working directory, which travels whole) to each host: into
// DIR/.cohort-data, under the data's own absolute path. The evaluation split goes to every host;
// the training split too, except that with --data_partition=files a host gets every .idx but
// only the .rec files its workers' ranks read (file f to rank f mod W).
struct DataSyncPlan {
  std::string dataset;       // the workers' --dataset and --eval_dataset on the hosts
  std::string eval_dataset;
  std::string root;          // DIR/.cohort-data
  std::vector<std::vector<std::string>> files_by_host;  // absolute paths here, by host index
  std::string summary;       // what goes where, for the launcher's line
};

// The plan for the worker flags `worker_words`, or nullopt when they name no dataset of
// encoded images outside working_dir. Errors name a dataset that is not there, or a relative
// path outside the working directory.
absl::StatusOr<std::optional<DataSyncPlan>> PlanDataSync(
    const std::vector<std::string>& worker_words, const std::string& working_dir,
    const std::string& dst_dir, const Placement& placement, int num_hosts);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_DATA_SYNC_H_
