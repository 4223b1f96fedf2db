// ShardCore's replication: a part's leader forwards each update to the part's backup and
// answers the workers once the backup holds it; the backup makes the same update with its own
// copy of the update rule, and, once it leads the part, answers the pushes it held already.

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/shard/shard_core.h"
#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status ShardCore::SetBackup(PartId id, ReplicaLink* link) {
  ASSIGN_OR_RETURN(PartState * p, FindPart(id, "backup"));
  absl::MutexLock lock(&p->mu);
  p->backup = link;
  p->backed_up_version = p->version;  // rank 0 initialised both alike
  return absl::OkStatus();
}

absl::Status ShardCore::AddBackup(absl::Span<const PartId> parts, int share, ReplicaLink* link,
                                  std::function<void()> copied) {
  std::vector<PartState*> found;
  for (PartId id : parts) {
    ASSIGN_OR_RETURN(PartState * p, FindPart(id, "copy"));
    found.push_back(p);
  }
  if (found.empty()) {
    copied();
    return absl::OkStatus();
  }
  auto left = std::make_shared<std::atomic<size_t>>(found.size());
  auto done = std::make_shared<std::function<void()>>(std::move(copied));
  for (size_t i = 0; i < found.size(); ++i) {
    PartState* p = found[i];
    absl::MutexLock lock(&p->mu);
    const PartCopy copy = CopyOf(*p, share);
    // Under the part's lock: its next update is forwarded after the copy, to the same link.
    p->backup = link;
    p->backed_up_version = -1;
    const PartId id = parts[i];
    const int64_t version = p->version;
    link->Forward(ReplicaUpdate{id, version, 0, p->value->data, -1, 0, &copy},
                  [p, version, left, done] {
                    SendHeldAnswers(p, version);
                    if (left->fetch_sub(1) == 1) (*done)();
                  });
  }
  return absl::OkStatus();
}

void ShardCore::DropBackupLink(const ReplicaLink* link) {
  absl::ReaderMutexLock lock(&mu_);
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    if (p->backup == link) p->backup = nullptr;
  }
}

void ShardCore::DropBackups() {
  absl::ReaderMutexLock lock(&mu_);
  for (auto& [id, p] : parts_) {
    absl::MutexLock part_lock(&p->mu);
    p->backup = nullptr;
  }
}

PartCopy ShardCore::CopyOf(const PartState& p, int share) const {
  PartCopy copy;
  copy.share = share;
  copy.config = &p.settings->config;
  if (p.optimizer != nullptr) copy.optimizer = p.optimizer->SaveState(0);
  if (p.settings->config.mode == KVStoreMode::kDistAsync) {
    copy.pushed_on_by_rank = p.async_pushed_on;
    if (p.optimizer == nullptr) copy.latest_pushes = p.slots;
  } else {
    // dist_sync: version v holds every push computed on the versions before it.
    copy.pushed_on_by_rank.assign(p.settings->config.num_workers, p.version - 1);
  }
  return copy;
}

absl::Status ShardCore::TakeCopy(const ReplicaUpdate& u) {
  const PartCopy& copy = *u.copy;
  const std::string where = absl::StrCat("shard ", shard_rank_.load(), ": the copy of key ",
                                         u.id.key, " part ", u.id.part, " at version ", u.version);
  PartState* p = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!configured_) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " came before the job's settings"));
    }
    auto it = parts_.find(u.id);
    if (it == parts_.end()) {
      auto created = std::make_unique<PartState>();
      created->id = u.id;
      absl::MutexLock part_lock(&created->mu);
      created->settings = settings_;
      created->share = copy.share;
      if (checkpoints_ != nullptr) checkpoints_->Holds(copy.share);
      created->value = std::make_unique<PinnedValue>();
      if (!auxiliary_keys_.contains(u.id.key)) {
        const OptimizerSpec& spec = settings_->config.optimizer;
        created->optimizer = *MakeOptimizer(spec.optimizer, spec.optimizer_options);
      }
      it = parts_.emplace(u.id, std::move(created)).first;
      ++expected_parts_;
    }
    p = it->second.get();
  }
  absl::MutexLock lock(&p->mu);
  const ShardConfig& config = p->settings->config;
  if (p->backup != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " came from another shard, but this one leads the part"));
  }
  const size_t workers = static_cast<size_t>(config.num_workers);
  const bool async_auxiliary =
      config.mode == KVStoreMode::kDistAsync && p->optimizer == nullptr;
  if (copy.pushed_on_by_rank.size() != workers ||
      (async_auxiliary && copy.latest_pushes.size() != workers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " names the pushes of ", copy.pushed_on_by_rank.size(), " ranks; the job has ",
        workers, " workers"));
  }
  WritableValue(p).assign(u.values.begin(), u.values.end());
  p->version = u.version;
  if (p->optimizer != nullptr) {
    const absl::Status loaded =
        p->optimizer->LoadState(0, static_cast<int64_t>(u.values.size()), copy.optimizer);
    if (!loaded.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", loaded.message()));
  }
  ResetPushes(p);
  if (async_auxiliary) p->slots = copy.latest_pushes;
  if (config.mode == KVStoreMode::kDistAsync) p->async_pushed_on = copy.pushed_on_by_rank;
  p->replicated_pushes = copy.pushed_on_by_rank;
  return absl::OkStatus();
}

void ShardCore::Answer(PartId id, PartState* p, PartSink* reply_to) {
  if (p->backup == nullptr || p->backed_up_version >= p->version) {
    reply_to->Send(id, p->version, p->value->data, &p->value->readers);
    return;
  }
  p->held.push_back({p->version, reply_to});
}

void ShardCore::Forward(PartId id, PartState* p, float lr, int rank, int64_t pushed_on) {
  ReplicaUpdate update{id, p->version, lr, {}, rank, pushed_on};
  if (p->optimizer == nullptr) {
    update.values =
        rank < 0 ? absl::MakeConstSpan(p->value->data) : absl::MakeConstSpan(p->slots[rank]);
  } else {
    update.values = absl::MakeConstSpan(reinterpret_cast<const float*>(p->forwarded.data()),
                                        p->forwarded.size() / sizeof(float));
    update.buffer = &p->forwarded;
  }
  const int64_t version = p->version;
  // Two words: std::function keeps them without allocating.
  p->backup->Forward(update, [p, version] { SendHeldAnswers(p, version); });
}

void ShardCore::SendHeldAnswers(PartState* p, int64_t version) {
  absl::MutexLock lock(&p->mu);
  p->backed_up_version = std::max(p->backed_up_version, version);
  // In the order they were held: dist_sync's rotation of who hears first stays.
  auto kept = p->held.begin();
  for (PartState::HeldAnswer& h : p->held) {
    if (h.version > version) {
      *kept++ = h;
    } else if (h.sink != nullptr) {
      h.sink->Send(p->id, p->version, p->value->data, &p->value->readers);
    }
  }
  p->held.erase(kept, p->held.end());
}

absl::Status ShardCore::ApplyReplica(const ReplicaUpdate& u) {
  if (u.copy != nullptr) return TakeCopy(u);
  ASSIGN_OR_RETURN(PartState * p, FindPart(u.id, "replica"));
  absl::MutexLock lock(&p->mu);
  const ShardConfig& config = p->settings->config;
  // Only for a refusal: built for every update, the words would cost more than the update.
  const auto where = [&] {
    return absl::StrCat("shard ", shard_rank_.load(), ": the update of key ", u.id.key, " part ",
                        u.id.part, " to version ", u.version);
  };
  if (p->backup != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(where(), " came from another shard, but this one leads the part"));
  }
  if (u.version != p->version + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        where(), " came while its backup is at version ", p->version,
        ": a leader's updates must reach the backup each once, in order"));
  }
  const size_t elements = p->value->data.size();
  if (u.values.size() != elements || u.rank >= config.num_workers ||
      (config.mode == KVStoreMode::kDistAsync) != (u.rank >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where(), " holds ", u.values.size(), " values of rank ", u.rank, "; the part has ",
        elements, " elements in a ", KVStoreModeName(config.mode), " job of ", config.num_workers,
        " workers"));
  }
  absl::Span<float> value = absl::MakeSpan(WritableValue(p));
  if (p->optimizer == nullptr) {
    if (u.rank < 0) {
      std::copy(u.values.begin(), u.values.end(), value.begin());
    } else {
      const absl::Span<const char> bytes(reinterpret_cast<const char*>(u.values.data()),
                                         u.values.size() * sizeof(float));
      AverageIntoValue(p, ByteChunks(&bytes, 1), u.rank, value);
    }
  } else {
    // In the leader's blocks: the same optimizer calls on the same numbers.
    p->optimizer->BeginUpdate(0, static_cast<int64_t>(elements));
    for (size_t first = 0; first < elements; first += kBlockFloats) {
      const size_t n = std::min(kBlockFloats, elements - first);
      p->optimizer->Apply(0, static_cast<int64_t>(first), value.subspan(first, n),
                          u.values.subspan(first, n), u.lr);
    }
  }
  p->version = u.version;
  if (p->replicated_pushes.empty()) p->replicated_pushes.assign(config.num_workers, -1);
  if (u.rank < 0) {
    std::fill(p->replicated_pushes.begin(), p->replicated_pushes.end(), u.pushed_on);
  } else {
    p->replicated_pushes[u.rank] = u.pushed_on;
    p->async_pushed_on[u.rank] = u.pushed_on;
  }
  Applied(p->version, 0);  // the version only: no push of a worker came here
  MaybeCheckpoint(u.id, p);
  return absl::OkStatus();
}

bool ShardCore::AnsweredAsReplicated(const PartHeader& header, PartState* p,
                                     PartSink* reply_to) {
  if (header.rank < 0 || header.rank >= static_cast<int>(p->replicated_pushes.size())) {
    return false;
  }
  int64_t& held = p->replicated_pushes[header.rank];
  if (held < 0 || header.version > held) {
    held = -1;  // the rank has gone on past what the leader forwarded
    return false;
  }
  Answer(header.id, p, reply_to);
  return true;
}

}  // namespace cohort
