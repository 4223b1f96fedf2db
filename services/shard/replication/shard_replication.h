#ifndef COHORT_SERVICES_SHARD_REPLICATION_SHARD_REPLICATION_H_
#define COHORT_SERVICES_SHARD_REPLICATION_SHARD_REPLICATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"
#include "services/shard/replication/backup_link.h"
#include "services/shard/shard_core.h"
#include "services/shard/shard_set_up.h"
#include "services/wire/part_id.h"
#include "services/wire/shard_config.h"

namespace cohort {

// A shard's part in a job of replicated shards (--shard_replicas 2), gRPC-free. Each share (a
// shard rank's part of the model) is led by one shard and backed up by another, which makes
// every update its leader makes (chain replication: ShardCore::ApplyLeaderUpdate), so that a worker
// whose shard died goes on with the backup and no answered step is lost. Three cases:
//
// - Leading: rank 0's Init hands the shard its parts, those it leads and those it backs up
//   for another (Holds), then names the backup of the parts it leads (LinkLedParts): their
//   updates go there through a BackupLink made by the factory (a Replicate stream, or two
//   shared-memory rings on one host), and the workers' answers wait until the backup has them.
// - Backing up: the leaders' updates come in batches (BackupIntake: OpenIntake and
//   TakeUpdates, from a gRPC stream served (ServeStream) or a shared-memory session); a
//   refused one ends that leader's stream, and its parts go on without a backup.
// - Coming back: a shard that came back into the running job holds nothing and leads nothing:
//   it asks each share's leader for a copy (share_copier.h); the leader (CopyShareTo) links to
//   it and sends every part of the share whole (PartCopy), then its updates; the copies are
//   counted by share here (PartsOfShare), and the first copy's settings configure the core.
//
// The way back when a leader dies, its backup taking the workers' pushes over, is the workers'
// (DistKVStoreCore::TakeOver, services/worker/dist_kvstore_core.h); this room keeps the
// backup's copy equal to the leader's until then.
//
// Thread safety: every method may be called from any thread. Close ends it all once: links to
// the backups go, the streams served are cancelled, and later streams and copies are refused.
class ShardReplication : public BackupIntake {
 public:
  // The link to the backup at an address (host:port).
  using LinkFactory = std::function<std::unique_ptr<BackupLink>(const std::string& address)>;

  // core and set_up outlive this; calls wait for set_up (its Leave lets them go). make_link:
  // null for a shard started without a way to reach a backup: it leads nothing backed up
  // (LinkLedParts and CopyShareTo are refused), though it may be one. log: what a person
  // reads (the links made, the copies sent).
  ShardReplication(ShardCore* core, const ShardSetUp* set_up, LinkFactory make_link,
                   std::ostream* log);

  // Rank 0's Init: the shard holds part `id` of `share`.
  void Holds(int share, PartId id) ABSL_LOCKS_EXCLUDED(mu_);
  // After Init's parts: with a backup address, every part in `led` forwards its updates to the
  // backup there from now on (said on log, with the parts it backs up of num_parts).
  absl::Status LinkLedParts(const std::string& backup_address, absl::Span<const PartId> led,
                            int num_parts) ABSL_LOCKS_EXCLUDED(mu_);

  // BackupIntake: a shared-memory session's batches.
  absl::Status OpenIntake() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status TakeUpdates(const v1::LeaderUpdateBatch& batch,
                            absl::Span<const absl::Span<const char>> values,
                            absl::string_view from) override ABSL_LOCKS_EXCLUDED(mu_);

  // A leader's gRPC stream begins (OpenIntake), served until the returned guard goes; cancel
  // ends it from here (Close), never after the guard went.
  class ServedStream;
  absl::StatusOr<std::unique_ptr<ServedStream>> ServeStream(std::function<void()> cancel)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The shard `rank` at `address` came back and backs up `share`, which this shard leads, from
  // now on: each part's copy goes there, then its updates. Returns how many parts were copied,
  // once the copies are held there (DeadlineExceeded after a minute; Unavailable when the link
  // failed; NotFound when this shard holds no part of the share).
  absl::StatusOr<int> CopyShareTo(int share, int rank, const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);
  // How many parts of `share` this shard holds.
  int PartsOfShare(int share) const ABSL_LOCKS_EXCLUDED(mu_);

  // The job is over: see the class comment. The core's parts stop forwarding before the links
  // go.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The job's settings from a leader's first copy, for a shard rank 0 never initialised.
  absl::Status ConfigureFromCopy(const v1::InitMessage::Config& config) ABSL_LOCKS_EXCLUDED(mu_);
  // One update, or copy, into the core; values: its F32 bytes.
  absl::Status TakeLeaderUpdate(const v1::LeaderUpdate& u, absl::Span<const char> values)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EndStream(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  ShardCore* const core_;
  const ShardSetUp* const set_up_;
  const LinkFactory make_link_;
  std::ostream* const log_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // The gRPC streams served, by id, with how to cancel each.
  int64_t next_stream_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int64_t, std::function<void()>> streams_ ABSL_GUARDED_BY(mu_);
  // To the backups of the parts this shard leads (Init's, then one a CopyShareTo), until Close.
  std::vector<std::unique_ptr<BackupLink>> links_ ABSL_GUARDED_BY(mu_);
  // The parts held, by share: what a CopyShareTo copies.
  absl::flat_hash_map<int, absl::flat_hash_set<PartId>> shares_ ABSL_GUARDED_BY(mu_);
};

// Ends its stream's registration (ShardReplication::ServeStream) as it goes.
class ShardReplication::ServedStream {
 public:
  ServedStream(ShardReplication* replication, int64_t id) : replication_(replication), id_(id) {}
  ~ServedStream() { replication_->EndStream(id_); }
  ServedStream(const ServedStream&) = delete;
  ServedStream& operator=(const ServedStream&) = delete;

 private:
  ShardReplication* const replication_;
  const int64_t id_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_REPLICATION_SHARD_REPLICATION_H_
