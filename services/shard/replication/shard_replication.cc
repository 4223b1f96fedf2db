#include "services/shard/replication/shard_replication.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "services/common/count_text.h"
#include "services/common/log_safe.h"
#include "services/wire/config_proto.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

// How long a CopyShareTo waits for its copies to be held.
constexpr absl::Duration kCopyWait = absl::Minutes(1);

// Floats from a message's bytes, read in place: protobuf's string is aligned for any scalar
// (it comes from operator new), and so are a ring's values (shm_backup_link.h).
absl::StatusOr<absl::Span<const float>> FloatsOf(absl::Span<const char> bytes,
                                                 const v1::LeaderUpdate& u) {
  if (bytes.size() % sizeof(float) != 0 ||
      reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the leader's update of key ", u.key(), " part ",
                                                   u.part(), ": ", bytes.size(),
                                                   " bytes are no F32 values"));
  }
  return absl::Span<const float>(reinterpret_cast<const float*>(bytes.data()),
                                 bytes.size() / sizeof(float));
}

absl::StatusOr<absl::Span<const float>> FloatsOf(const std::string& bytes,
                                                 const v1::LeaderUpdate& u) {
  return FloatsOf(absl::MakeConstSpan(bytes), u);
}

}  // namespace

ShardReplication::ShardReplication(ShardCore* core, const ShardSetUp* set_up,
                                   LinkFactory make_link, std::ostream* log)
    : core_(core), set_up_(set_up), make_link_(std::move(make_link)), log_(log) {}

void ShardReplication::Holds(int share, PartId id) {
  absl::MutexLock lock(&mu_);
  shares_[share].insert(id);
}

absl::Status ShardReplication::LinkLedParts(const std::string& backup_address,
                                            absl::Span<const PartId> led, int num_parts) {
  if (backup_address.empty()) return absl::OkStatus();
  if (make_link_ == nullptr) {
    return absl::FailedPreconditionError(
        "shard init: the job replicates its shards, but this shard was started without a way "
        "to reach its backup");
  }
  absl::MutexLock lock(&mu_);
  links_.push_back(make_link_(backup_address));
  for (PartId id : led) RETURN_IF_ERROR(core_->SetBackup(id, links_.back().get()));
  *log_ << absl::StrCat("shard ", core_->rank(), ": its backup at ", LogSafe(backup_address, 128),
                        " keeps the ", Count(led.size(), "part"), " it leads; it backs up ",
                        Count(num_parts - led.size(), "part"), " of another shard\n");
  return absl::OkStatus();
}

absl::Status ShardReplication::OpenIntake() {
  RETURN_IF_ERROR(set_up_->Wait("replicate"));
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError("the shard left the job");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardReplication::ServedStream>> ShardReplication::ServeStream(
    std::function<void()> cancel) {
  RETURN_IF_ERROR(set_up_->Wait("replicate"));
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError("the shard left the job");
  const int64_t id = next_stream_++;
  streams_.emplace(id, std::move(cancel));
  return std::make_unique<ServedStream>(this, id);
}

void ShardReplication::EndStream(int64_t id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

absl::Status ShardReplication::TakeUpdates(const v1::LeaderUpdateBatch& batch,
                                            absl::Span<const absl::Span<const char>> values,
                                            absl::string_view from) {
  absl::Status taken = batch.has_config() ? ConfigureFromCopy(batch.config()) : absl::OkStatus();
  if (values.size() != static_cast<size_t>(batch.updates_size())) {
    taken = absl::InvalidArgumentError(absl::StrCat("a batch of ", batch.updates_size(),
                                                    " updates came with ", values.size(),
                                                    " values"));
  }
  for (int i = 0; taken.ok() && i < batch.updates_size(); ++i) {
    taken = TakeLeaderUpdate(batch.updates(i), values[i]);
  }
  if (!taken.ok()) {
    *log_ << absl::StrCat(taken.message(), " (from ", from,
                          "); the leader's parts go on without this backup\n");
  }
  return taken;
}

absl::Status ShardReplication::TakeLeaderUpdate(const v1::LeaderUpdate& u,
                                           absl::Span<const char> bytes) {
  ASSIGN_OR_RETURN(const absl::Span<const float> values, FloatsOf(bytes, u));
  LeaderUpdate update{{u.key(), u.part()}, u.version(), u.lr(), values, u.rank(), u.pushed_on()};
  if (!u.copy()) return core_->ApplyLeaderUpdate(update);
  PartCopy copy;
  copy.share = u.share();
  for (const auto& [name, bytes] : u.optimizer()) {
    ASSIGN_OR_RETURN(const absl::Span<const float> tensor, FloatsOf(bytes, u));
    copy.optimizer.tensors[name].assign(tensor.begin(), tensor.end());
  }
  copy.optimizer.updates = u.optimizer_updates();
  copy.pushed_on_by_rank.assign(u.pushed_on_by_rank().begin(), u.pushed_on_by_rank().end());
  for (const std::string& bytes : u.latest_pushes()) {
    ASSIGN_OR_RETURN(const absl::Span<const float> push, FloatsOf(bytes, u));
    copy.latest_pushes.emplace_back(push.begin(), push.end());
  }
  update.copy = &copy;
  RETURN_IF_ERROR(core_->ApplyLeaderUpdate(update));
  Holds(copy.share, update.id);
  return absl::OkStatus();
}

absl::Status ShardReplication::ConfigureFromCopy(const v1::InitMessage::Config& message) {
  ASSIGN_OR_RETURN(ShardConfig config, FromProto(message));
  // Copies from two leaders may come at once: the first configures.
  absl::MutexLock lock(&mu_);
  if (core_->config().has_value()) return absl::OkStatus();
  config.num_parts = 0;  // the copies add them
  config.backup_address.clear();
  return core_->Configure(config);
}

absl::StatusOr<int> ShardReplication::CopyShareTo(int share, int rank,
                                                  const std::string& address) {
  RETURN_IF_ERROR(set_up_->Wait("copy share"));
  const std::string who = absl::StrCat("shard ", rank, " at ", LogSafe(address, 128));
  if (make_link_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", core_->rank(), " was started without a way to reach a backup; ",
                     who, " cannot back it up"));
  }
  std::vector<PartId> parts;
  BackupLink* link = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError("the shard left the job");
    auto it = shares_.find(share);
    if (it == shares_.end()) {
      return absl::NotFoundError(absl::StrCat("shard ", core_->rank(), " holds no part of share ",
                                              share, ", which ", who, " was to back up"));
    }
    parts.assign(it->second.begin(), it->second.end());
    // Links to backups that died go, with what they hold (a shard copies a share at every
    // comeback of another: they would pile up).
    for (auto l = links_.begin(); l != links_.end();) {
      if (!(*l)->broken()) {
        ++l;
        continue;
      }
      core_->DropBackupLink(l->get());
      l = links_.erase(l);
    }
    links_.push_back(make_link_(address));
    link = links_.back().get();
  }
  const absl::Time start = absl::Now();
  auto copied = std::make_shared<absl::Notification>();
  RETURN_IF_ERROR(core_->AddBackup(parts, share, link, [copied] { copied->Notify(); }));
  if (!copied->WaitForNotificationWithTimeout(kCopyWait)) {
    return absl::DeadlineExceededError(
        absl::StrCat("shard ", core_->rank(), ": the copy of share ", share, " to ", who,
                     " was not held within ", absl::FormatDuration(kCopyWait)));
  }
  if (link->broken()) {
    return absl::UnavailableError(absl::StrCat("shard ", core_->rank(), ": the copy of share ",
                                               share, " did not reach ", who,
                                               " (see this shard's log)"));
  }
  *log_ << absl::StrFormat("shard %d: %s backs up share %d (%s) from now on, copied in %.0f ms\n",
                           core_->rank(), who, share, Count(parts.size(), "part"),
                           absl::ToDoubleMilliseconds(absl::Now() - start));
  return static_cast<int>(parts.size());
}

int ShardReplication::PartsOfShare(int share) const {
  absl::MutexLock lock(&mu_);
  auto it = shares_.find(share);
  return it == shares_.end() ? 0 : static_cast<int>(it->second.size());
}

void ShardReplication::Close() {
  std::vector<std::unique_ptr<BackupLink>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
    closed_ = true;
    for (const auto& [id, cancel] : streams_) cancel();
  }
  // The parts stop forwarding before the links go: no update reaches them afterwards.
  core_->DropBackups();
}

}  // namespace cohort
