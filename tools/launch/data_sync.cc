#include "tools/launch/data_sync.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainer/base/status_macros.h"
#include "trainer/data/encoded_images.h"
#include "tools/launch/programs.h"

namespace cohort::launch {
namespace {

// A split's files: the index files and the record files (by file order) of RecordIO, every
// file of TFRecord, the folder of an image folder or of a list.
struct SplitFiles {
  std::vector<std::string> always;   // every host that reads the split needs them
  std::vector<std::string> records;  // RecordIO's .rec, file f for rank f mod W
};

SplitFiles FilesOf(const std::string& spec) {
  const auto [kind, path] = ParseEncodedImagesSpec(spec);
  SplitFiles files;
  if (kind == "recordio:") {
    for (const std::string& idx : RecordIOIndexFiles(path)) {
      files.always.push_back(idx);
      files.records.push_back(idx.substr(0, idx.size() - 4) + ".rec");
    }
  } else if (kind == "tfrecord:") {
    files.always = MatchingFiles(path);
  } else {
    // A list names images anywhere below its folder.
    files.always = {absl::EndsWith(path, ".lst") ? path.substr(0, path.rfind('/')) : path};
  }
  return files;
}

}  // namespace

absl::StatusOr<std::optional<DataSyncPlan>> PlanDataSync(
    const std::vector<std::string>& worker_words, const std::string& working_dir,
    const std::string& dst_dir, const Placement& placement, int num_hosts) {
  std::string dataset, eval_dataset, partition = "samples";
  VisitFlags(worker_words, [&](const std::string& name, const std::string& value) {
    if (name == "dataset") dataset = value;
    if (name == "eval_dataset") eval_dataset = value;
    if (name == "data_partition") partition = value;
  });
  const EncodedImagesSpec spec = ParseEncodedImagesSpec(dataset);
  // A relative path lies inside the working directory, which is copied whole.
  if (spec.kind.empty() || spec.path.empty() || spec.path[0] != '/' ||
      absl::StartsWith(spec.path, working_dir + "/")) {
    return std::nullopt;
  }
  ASSIGN_OR_RETURN(const DatasetSplits splits, ResolveSplits(dataset, eval_dataset));
  DataSyncPlan plan;
  plan.root = absl::StrCat(dst_dir, "/.cohort-data");
  // The same data under the copy's root.
  const auto moved = [&plan](const std::string& split) {
    const EncodedImagesSpec s = ParseEncodedImagesSpec(split);
    return absl::StrCat(s.kind, plan.root, s.path);
  };
  plan.dataset = moved(splits.train);
  plan.eval_dataset = moved(splits.eval);
  const SplitFiles train = FilesOf(splits.train), eval = FilesOf(splits.eval);
  const int workers = static_cast<int>(placement.workers.size());
  const bool by_files = partition == "files" && !train.records.empty();
  std::vector<std::set<int>> records_of(static_cast<size_t>(num_hosts));
  for (int f = 0; f < static_cast<int>(train.records.size()); ++f) {
    for (int rank = 0; rank < workers; ++rank) {
      if (!by_files || f % workers == rank) {
        records_of[static_cast<size_t>(placement.workers[rank])].insert(f);
      }
    }
  }
  plan.files_by_host.resize(static_cast<size_t>(num_hosts));
  std::vector<std::string> counts;
  for (int h = 0; h < num_hosts; ++h) {
    std::vector<std::string>& files = plan.files_by_host[static_cast<size_t>(h)];
    if (std::find(placement.workers.begin(), placement.workers.end(), h) ==
        placement.workers.end()) {
      continue;  // no worker there
    }
    files = train.always;
    for (const int f : records_of[static_cast<size_t>(h)]) {
      files.push_back(train.records[static_cast<size_t>(f)]);
    }
    files.insert(files.end(), eval.always.begin(), eval.always.end());
    files.insert(files.end(), eval.records.begin(), eval.records.end());
    if (by_files) counts.push_back(absl::StrCat(records_of[static_cast<size_t>(h)].size()));
  }
  plan.summary = by_files ? absl::StrFormat("%s, its %d .rec files shared out by rank (%s per host)",
                                            splits.train, train.records.size(),
                                            absl::StrJoin(counts, "/"))
                          : splits.train;
  return plan;
}

}  // namespace cohort::launch
