#include "services/checkpoint/shard_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/checkpoint/checkpoint_files.h"
#include "trainer/io/whole_file.h"
#include "trainer/base/status_macros.h"
#include "trainer/io/safetensors.h"

namespace cohort {
namespace {

constexpr char kFormat[] = "cohort-shard-checkpoint";

std::string PartName(PartId id) { return absl::StrCat(id.key, ".", id.part); }

Tensor ToTensor(const std::vector<float>& values) {
  Tensor t(Shape{static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

std::vector<float> ToVector(const Tensor& t) {
  const absl::Span<const float> s = t.span<float>();
  return std::vector<float>(s.begin(), s.end());
}

// The metadata value `name`, as an integer.
template <typename Int>
absl::Status MetadataInt(const std::map<std::string, std::string>& metadata,
                         const std::string& name, absl::string_view where, Int* out, int base = 10) {
  auto it = metadata.find(name);
  bool ok = it != metadata.end();
  if (ok && base == 16) {
    uint64_t v = 0;
    ok = absl::SimpleHexAtoi(it->second, &v);
    *out = static_cast<Int>(v);
  } else if (ok) {
    ok = absl::SimpleAtoi(it->second, out);
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": metadata \"", name, "\" is missing or not a number"));
}

}  // namespace

std::string ShardCheckpointFile(int shard_rank) {
  return absl::StrCat("shard-", shard_rank, ".safetensors");
}

std::string ShardCheckpointManifest(int shard_rank) {
  return absl::StrCat("shard-", shard_rank, ".manifest");
}

std::vector<std::string> ShardCheckpointManifests(int num_shards) {
  std::vector<std::string> names;
  for (int r = 0; r < num_shards; ++r) names.push_back(ShardCheckpointManifest(r));
  return names;
}

std::string EncodeShardCheckpoint(const ShardCheckpoint& c) {
  std::map<std::string, std::string> metadata = {
      {"format", kFormat},
      {"step", absl::StrCat(c.step)},
      {"shard", absl::StrCat(c.shard_rank)},
      {"num_shards", absl::StrCat(c.num_shards)},
      {"mode", c.mode},
      {"num_workers", absl::StrCat(c.num_workers)},
      {"steps_per_epoch", absl::StrCat(c.steps_per_epoch)},
      {"partition_fingerprint", absl::StrCat(absl::Hex(c.partition_fingerprint))},
  };
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const PartCheckpoint& p : c.parts) {
    const std::string name = PartName(p.id);
    metadata[name + ".version"] = absl::StrCat(p.version);
    metadata[name + ".updates"] = absl::StrCat(p.optimizer.updates);
    tensors.emplace_back(name, ToTensor(p.value));
    for (const auto& [state, values] : p.optimizer.tensors) {
      tensors.emplace_back(absl::StrCat(name, ".", state), ToTensor(values));
    }
  }
  std::vector<NamedTensor> named;
  for (const auto& [name, t] : tensors) named.push_back({name, &t});
  return EncodeSafetensors(named, metadata);
}

absl::StatusOr<ShardCheckpoint> DecodeShardCheckpoint(absl::string_view bytes,
                                                      absl::string_view where) {
  ASSIGN_OR_RETURN(SafetensorsFile file, DecodeSafetensors(bytes, where));
  const auto& md = file.metadata;
  auto format = md.find("format");
  if (format == md.end() || format->second != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a shard checkpoint (metadata \"format\" is not ", kFormat, ")"));
  }
  ShardCheckpoint c;
  RETURN_IF_ERROR(MetadataInt(md, "step", where, &c.step));
  RETURN_IF_ERROR(MetadataInt(md, "shard", where, &c.shard_rank));
  RETURN_IF_ERROR(MetadataInt(md, "num_shards", where, &c.num_shards));
  RETURN_IF_ERROR(MetadataInt(md, "num_workers", where, &c.num_workers));
  if (md.count("steps_per_epoch") != 0) {
    RETURN_IF_ERROR(MetadataInt(md, "steps_per_epoch", where, &c.steps_per_epoch));
  }
  RETURN_IF_ERROR(MetadataInt(md, "partition_fingerprint", where, &c.partition_fingerprint, 16));
  c.mode = md.count("mode") ? md.at("mode") : "";
  // Values come first, each followed by its optimizer tensors (the order Encode writes).
  for (size_t i = 0; i < file.names.size(); ++i) {
    const std::string& name = file.names[i];
    const std::vector<std::string> fields = absl::StrSplit(name, '.');
    PartId id;
    if (fields.size() < 2 || fields.size() > 3 || !absl::SimpleAtoi(fields[0], &id.key) ||
        !absl::SimpleAtoi(fields[1], &id.part) || file.tensors[i].dtype() != DType::kF32 ||
        file.tensors[i].shape().rank() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tensor \"", name, "\" is not <key>.<part>[.<state>] of 1-D F32"));
    }
    if (fields.size() == 2) {
      PartCheckpoint& p = c.parts.emplace_back();
      p.id = id;
      p.value = ToVector(file.tensors[i]);
      RETURN_IF_ERROR(MetadataInt(md, name + ".version", where, &p.version));
      RETURN_IF_ERROR(MetadataInt(md, name + ".updates", where, &p.optimizer.updates));
      continue;
    }
    if (c.parts.empty() || !(c.parts.back().id == id)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": optimizer tensor \"", name, "\" does not follow its part"));
    }
    c.parts.back().optimizer.tensors[fields[2]] = ToVector(file.tensors[i]);
  }
  return c;
}

absl::StatusOr<int64_t> WriteShardCheckpoint(const std::string& root, const ShardCheckpoint& c) {
  std::map<std::string, std::string> files;
  std::string& bytes = files[ShardCheckpointFile(c.shard_rank)] = EncodeShardCheckpoint(c);
  RETURN_IF_ERROR(WriteCheckpointFiles(root, c.step, ShardCheckpointManifest(c.shard_rank), files,
                                       {{"shard", absl::StrCat(c.shard_rank)},
                                        {"num_shards", absl::StrCat(c.num_shards)}}));
  return static_cast<int64_t>(bytes.size());
}

namespace {

// The shard's file of the checkpoint at step, decoded and checked against where it lies and,
// given its manifest (sizes verified), against the checksum there: the file is read once.
absl::StatusOr<ShardCheckpoint> ReadShardCheckpoint(const std::string& root, int64_t step,
                                                    int shard_rank, int num_shards,
                                                    const Manifest* manifest) {
  const std::string file = ShardCheckpointFile(shard_rank);
  const std::string path = absl::StrCat(CheckpointFolder(root, step), "/", file);
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  if (manifest != nullptr) {
    const auto entry = std::find_if(manifest->files.begin(), manifest->files.end(),
                                    [&](const ManifestEntry& e) { return e.file == file; });
    if (entry == manifest->files.end() || Sha256Hex(bytes) != entry->sha256) {
      return absl::DataLossError(absl::StrCat(path, " does not match its checksum in ",
                                              ShardCheckpointManifest(shard_rank)));
    }
  }
  ASSIGN_OR_RETURN(ShardCheckpoint c, DecodeShardCheckpoint(bytes, path));
  if (c.step != step || c.shard_rank != shard_rank || c.num_shards != num_shards) {
    return absl::DataLossError(absl::StrCat(
        path, " says step ", c.step, ", shard ", c.shard_rank, " of ", c.num_shards,
        "; its folder and this job say step ", step, ", shard ", shard_rank, " of ", num_shards,
        " (a checkpoint of a job with another number of shards?)"));
  }
  return c;
}

// The files of `shares` at step as one checkpoint of the first share's rank, each part once
// (a file of an older replicated job also held the share its shard backed up); manifests,
// when given, one per share as in `shares`.
absl::StatusOr<ShardCheckpoint> ReadShares(const std::string& root, int64_t step,
                                           absl::Span<const int> shares, int num_shards,
                                           const std::vector<Manifest>* manifests) {
  ShardCheckpoint merged;
  absl::flat_hash_set<PartId> held;
  for (size_t i = 0; i < shares.size(); ++i) {
    ASSIGN_OR_RETURN(ShardCheckpoint c,
                     ReadShardCheckpoint(root, step, shares[i], num_shards,
                                         manifests != nullptr ? &(*manifests)[i] : nullptr));
    std::vector<PartCheckpoint> parts = std::move(c.parts);
    if (i == 0) merged = std::move(c);
    for (PartCheckpoint& part : parts) {
      if (held.insert(part.id).second) merged.parts.push_back(std::move(part));
    }
  }
  return merged;
}

}  // namespace

absl::StatusOr<ResumePoint> LoadLatestShardCheckpoint(const std::string& root,
                                                      absl::Span<const int> shares,
                                                      int num_shards) {
  // Checkpoints of another number of shards lack this job's manifests, which reads as damage.
  for (int64_t version : CheckpointVersions(root)) {  // newest first
    absl::StatusOr<Manifest> first = VerifyManifest(root, version, ShardCheckpointManifest(0),
                                                    Check::kSizes);
    if (!first.ok()) continue;
    int64_t written_by = 0;
    const auto it = first->metadata.find("num_shards");
    if (it != first->metadata.end() && absl::SimpleAtoi(it->second, &written_by) &&
        written_by != num_shards) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the checkpoints in ", root, " were written by a job of ", written_by,
          " shards; this job has ", num_shards, ": resume with -s ", written_by,
          " (each shard's checkpoint file holds the parts that shard served)"));
    }
    break;
  }
  ASSIGN_OR_RETURN(LatestCheckpoint latest,
                   FindLatestCheckpoint(root, ShardCheckpointManifests(num_shards)));
  ResumePoint point;
  ASSIGN_OR_RETURN(point.checkpoint, ReadShares(root, latest.version, shares, num_shards,
                                                /*manifests=*/nullptr));  // verified whole
  point.refused = std::move(latest.refused);
  point.damaged = std::move(latest.damaged);
  return point;
}

absl::StatusOr<ShardCheckpoint> LoadShardCheckpoint(const std::string& root, int64_t step,
                                                    absl::Span<const int> shares,
                                                    int num_shards) {
  std::vector<Manifest> manifests;
  for (int share : shares) {
    ASSIGN_OR_RETURN(manifests.emplace_back(),
                     VerifyManifest(root, step, ShardCheckpointManifest(share), Check::kSizes));
  }
  return ReadShares(root, step, shares, num_shards, &manifests);
}

std::vector<int64_t> ShardCheckpointSteps(const std::string& root, absl::Span<const int> shares) {
  std::vector<int64_t> steps;
  for (int64_t version : CheckpointVersions(root)) {  // newest first
    const bool held = std::all_of(shares.begin(), shares.end(), [&](int share) {
      std::error_code error;
      return std::filesystem::exists(
          absl::StrCat(CheckpointFolder(root, version), "/", ShardCheckpointManifest(share)),
          error);
    });
    if (held) steps.push_back(version);
  }
  std::reverse(steps.begin(), steps.end());
  return steps;
}

absl::Status RemoveShardFilesAfter(const std::string& root, int shard_rank, int64_t step) {
  for (int64_t version : CheckpointVersions(root)) {
    if (version <= step) break;  // newest first
    for (const std::string& name :
         {ShardCheckpointManifest(shard_rank), ShardCheckpointFile(shard_rank)}) {
      const std::string path = absl::StrCat(CheckpointFolder(root, version), "/", name);
      std::error_code error;
      std::filesystem::remove(path, error);
      if (error) {
        return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", error.message()));
      }
    }
    std::error_code ignored;  // other shards' files may still be there
    std::filesystem::remove(CheckpointFolder(root, version), ignored);
  }
  return absl::OkStatus();
}

}  // namespace cohort
