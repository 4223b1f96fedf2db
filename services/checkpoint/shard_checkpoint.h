#ifndef COHORT_SERVICES_CHECKPOINT_SHARD_CHECKPOINT_H_
#define COHORT_SERVICES_CHECKPOINT_SHARD_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "services/wire/part_id.h"
#include "trainer/optim/optimizer.h"

namespace cohort {

// A share of a checkpoint (the parts the partition map gives shard r): their values and
// optimizer state at one agreed step. Under the checkpoint's folder (checkpoint_files.h) the
// shard leading share r writes shard-<r>.safetensors, then shard-<r>.manifest; the checkpoint
// is complete when every share's manifest verifies. Shard r leads share r, and with replicated
// shards also the shares whose shards died while it backed them up.
//
// The safetensors file holds, for each part "<key>.<part>" (F32, 1-D), its value under that name
// and each optimizer tensor under "<key>.<part>.<name>" ("velocity"; "m", "v"). Its metadata
// says "format": "cohort-shard-checkpoint", "step", "shard", "num_shards", "mode",
// "num_workers", "partition_fingerprint" (hex), and per part "<key>.<part>.version" and
// "<key>.<part>.updates" (decimal).

struct PartCheckpoint {
  PartId id;
  int64_t version = 0;  // updates applied to the part (dist_async: pushes)
  std::vector<float> value;
  OptimizerState optimizer;
};

struct ShardCheckpoint {
  int64_t step = 0;  // the agreed version the checkpoint is at (dist_sync: steps done)
  int shard_rank = 0;
  int num_shards = 1;
  std::string mode;  // dist_sync | dist_async
  int num_workers = 1;
  // Of the job that wrote it (its batch and number of workers): what a step means. 0: not
  // recorded (a checkpoint written before it was).
  int64_t steps_per_epoch = 0;
  uint64_t partition_fingerprint = 0;
  std::vector<PartCheckpoint> parts;
};

std::string ShardCheckpointFile(int shard_rank);      // "shard-3.safetensors"
std::string ShardCheckpointManifest(int shard_rank);  // "shard-3.manifest"
// Every shard's manifest: what a complete checkpoint of a job with num_shards shards holds.
std::vector<std::string> ShardCheckpointManifests(int num_shards);

std::string EncodeShardCheckpoint(const ShardCheckpoint& checkpoint);
// Strict: InvalidArgument naming `where` and what is wrong.
absl::StatusOr<ShardCheckpoint> DecodeShardCheckpoint(absl::string_view bytes,
                                                      absl::string_view where);

// Writes the shard's file and then its manifest into the step's folder under root, durably;
// returns the file's size in bytes.
absl::StatusOr<int64_t> WriteShardCheckpoint(const std::string& root, const ShardCheckpoint& checkpoint);

// The newest complete checkpoint under root (every one of num_shards manifests verifies) and
// the parts of `shares` in it (the shard's own first; with replicated shards also those it
// backs up), as one checkpoint of the first share's rank, with a line for each newer
// checkpoint refused (naming the file and why). NotFound when none is complete.
struct ResumePoint {
  ShardCheckpoint checkpoint;
  std::vector<std::string> refused;
  std::vector<int64_t> damaged;  // the newer versions refused for a file that does not match
};
absl::StatusOr<ResumePoint> LoadLatestShardCheckpoint(const std::string& root,
                                                      absl::Span<const int> shares,
                                                      int num_shards);

// The parts of `shares` in the checkpoint at `step` under root (as LoadLatestShardCheckpoint),
// their manifests and checksums verified (a roll back: the other shares' files are not read).
// DataLoss naming the file when it is damaged or says another step or shard; NotFound when it
// is missing.
absl::StatusOr<ShardCheckpoint> LoadShardCheckpoint(const std::string& root, int64_t step,
                                                    absl::Span<const int> shares,
                                                    int num_shards);

// The steps of the checkpoints under root that hold the manifests of all of `shares`, oldest
// first (what a shard holding them could roll back to; LoadShardCheckpoint verifies the one
// chosen).
std::vector<int64_t> ShardCheckpointSteps(const std::string& root, absl::Span<const int> shares);

// Removes this shard's files (its manifest first) from every checkpoint newer than `step`
// under root: a job resumed at `step` writes those steps again, and a folder must never mix
// one run's files with another's.
absl::Status RemoveShardFilesAfter(const std::string& root, int shard_rank, int64_t step);

}  // namespace cohort

#endif  // COHORT_SERVICES_CHECKPOINT_SHARD_CHECKPOINT_H_
