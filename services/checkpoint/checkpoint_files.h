#ifndef COHORT_SERVICES_CHECKPOINT_CHECKPOINT_FILES_H_
#define COHORT_SERVICES_CHECKPOINT_CHECKPOINT_FILES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// The files of checkpoints (Contracts: --checkpoint_dir, a folder per agreed version with a
// manifest written last). Under the checkpoint directory, version V lives in v<V> (twelve
// digits, so names sort by version); its writers (the shards) each write their files and then
// a manifest naming every one of them with its size and SHA-256. A checkpoint is complete
// when every manifest it needs is there and every file it names matches: a reader never trusts
// a file a manifest does not vouch for.

// Files are written with WriteFileDurably (services/common/durable_file.h).

// How much of a checkpoint's files VerifyManifest reads: their sizes only, or every byte.
enum class Check { kSizes, kChecksums };

// SHA-256 of bytes, as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view bytes);

struct ManifestEntry {
  std::string file;  // a name inside the version's folder
  int64_t bytes = 0;
  std::string sha256;
};

struct Manifest {
  int64_t version = 0;
  std::vector<ManifestEntry> files;
  std::map<std::string, std::string> metadata;  // e.g. the shard's rank, the step
};

// A manifest's JSON, checked field by field (no exceptions: a damaged file is an error; a file
// name must stay inside its folder).
absl::StatusOr<Manifest> ParseManifest(absl::string_view text);

// The folder of `version` under root (root/v000000000042), created on demand by the writers.
std::string CheckpointFolder(const std::string& root, int64_t version);

// Writes every file of `files` (name → bytes) into the version's folder durably, then the
// manifest `manifest_name` naming them, last. On a failure (a full disk) the files it wrote
// go again, and the folder when that leaves it empty.
absl::Status WriteCheckpointFiles(const std::string& root, int64_t version,
                                  const std::string& manifest_name,
                                  const std::map<std::string, std::string>& files,
                                  const std::map<std::string, std::string>& metadata);


// Reads manifest `manifest_name` of the version and checks every file it names (present, the
// size and, with kChecksums, the checksum it says). DataLoss naming the file and what is
// wrong, NotFound when the manifest is missing.
absl::StatusOr<Manifest> VerifyManifest(const std::string& root, int64_t version,
                                        const std::string& manifest_name,
                                        Check check = Check::kChecksums);

// The versions with a folder under root, newest first (nothing when root does not exist).
std::vector<int64_t> CheckpointVersions(const std::string& root);

// The newest version whose manifests (all of `manifest_names`) verify, and a line for each newer
// one refused, naming the file and the reason. NotFound when no version is complete.
struct LatestCheckpoint {
  int64_t version = 0;
  std::vector<Manifest> manifests;  // in the order of manifest_names
  std::vector<std::string> refused;
  std::vector<int64_t> damaged;  // the newer versions refused for a file that does not match
};
absl::StatusOr<LatestCheckpoint> FindLatestCheckpoint(
    const std::string& root, const std::vector<std::string>& manifest_names,
    Check check = Check::kChecksums);

// When the version's folder still holds a file that does not match its manifest (any of
// manifest_names), renames it to <folder>.damaged (.damaged-2, ... when taken) so that a
// person can look at it and no reader takes it for a checkpoint; returns the new path, or
// nothing when the folder is gone or whole (another writer set it aside, and may have begun
// writing that version again). Writers of one root do this one at a time (a lock file there).
absl::StatusOr<std::optional<std::string>> SetCheckpointAsideIfDamaged(
    const std::string& root, int64_t version, const std::vector<std::string>& manifest_names);

// Removes every version folder older than the newest `keep` complete ones (complete: all of
// manifest_names there, naming files of the sizes they say; checksums are read on resume
// only, so that pruning after every checkpoint does not read every kept one again);
// incomplete folders newer than those stay (a checkpoint being written). Several writers may
// prune at once.
absl::Status PruneCheckpoints(const std::string& root,
                              const std::vector<std::string>& manifest_names, int keep);

}  // namespace cohort

#endif  // COHORT_SERVICES_CHECKPOINT_CHECKPOINT_FILES_H_
