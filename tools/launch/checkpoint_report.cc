#include "tools/launch/checkpoint_report.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/checkpoint/checkpoint_files.h"
#include "services/checkpoint/shard_checkpoint.h"

namespace cohort::launch {

std::string NewestCheckpointReport(const std::string& root, int num_shards, absl::Time end) {
  const absl::StatusOr<LatestCheckpoint> latest =
      FindLatestCheckpoint(root, ShardCheckpointManifests(num_shards), Check::kSizes);
  if (!latest.ok()) {
    return absl::StrCat("no complete checkpoint in ", root, ": a resume would start over");
  }
  // Complete once its last manifest was written.
  absl::Time written = absl::InfinitePast();
  for (int s = 0; s < num_shards; ++s) {
    struct stat st;
    const std::string manifest = absl::StrCat(CheckpointFolder(root, latest->version), "/",
                                              ShardCheckpointManifest(s));
    if (stat(manifest.c_str(), &st) == 0) {
      written = std::max(written, absl::TimeFromTimespec(st.st_mtim));
    }
  }
  const absl::Duration age = std::max(absl::ZeroDuration(), end - written);
  return absl::StrFormat("newest complete checkpoint: step %d (%s), written %s before the end",
                         latest->version, CheckpointFolder(root, latest->version),
                         absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(100))));
}

}  // namespace cohort::launch
