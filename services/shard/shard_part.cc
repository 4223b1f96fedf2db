#include "services/shard/shard_part.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cohort {

std::vector<float>& ShardPart::WritableValue() {
  retired.erase(std::remove_if(retired.begin(), retired.end(),
                               [](const auto& v) { return v->readers.count() == 0; }),
                retired.end());
  if (value->readers.count() > 0) {
    auto fresh = std::make_unique<PinnedValue>();
    fresh->data = value->data;
    retired.push_back(std::move(value));
    value = std::move(fresh);
  }
  return value->data;
}

void ShardPart::ResetPushes() {
  arrived = 0;
  const ShardConfig& config = settings->config;
  if (config.mode == KVStoreMode::kDistSync) {
    slots.resize(config.num_workers);  // allocated on first use
    pushed.assign(config.num_workers, 0);
    waiting.assign(config.num_workers, nullptr);
  } else {
    async_pushed_on.assign(config.num_workers, -1);
    // An auxiliary part: until a worker pushes, it counts with the part's value.
    if (optimizer == nullptr) slots.assign(config.num_workers, value->data);
  }
}

void ShardPart::ApplyPush(ByteChunks grad, int rank, float lr) {
  const absl::Span<float> out_value = absl::MakeSpan(WritableValue());
  const size_t bytes = out_value.size() * sizeof(float);
  if (backup != nullptr && forwarded.size() != bytes) forwarded = backup->Spare(bytes);
  const ShardConfig& config = settings->config;
  const int num_workers = config.num_workers;
  const float scale = 1.0f / static_cast<float>(num_workers);
  // Per gRPC thread: the push's block and the reduced block, both small enough to stay in cache.
  thread_local std::vector<float> block(kBlockFloats), reduced(kBlockFloats);
  float* const forward_to = reinterpret_cast<float*>(forwarded.data());
  optimizer->BeginUpdate(0, static_cast<int64_t>(out_value.size()));
  ForEachFloatBlock(grad, absl::MakeSpan(block), [&](size_t first, absl::Span<const float> g) {
    const size_t n = g.size();
    absl::Span<const float> update = g;  // x · 1 == x: W = 1 needs no pass
    // With a backup, the update is made straight where it is forwarded from.
    float* const out = backup != nullptr ? forward_to + first : reduced.data();
    if (config.mode == KVStoreMode::kDistAsync && num_workers > 1) {
      for (size_t i = 0; i < n; ++i) out[i] = g[i] * scale;
      update = absl::MakeConstSpan(out, n);
    } else if (num_workers > 1) {
      // Rank order, whatever order the pushes arrived in: ((g0 + g1) + g2 ...) · (1/W), this
      // push read from its block and the others from their slots.
      const auto rank_values = [&](int r) {
        return r == rank ? g.data() : slots[r].data() + first;
      };
      for (int r = 1; r < num_workers; ++r) {
        const float* a = r == 1 ? rank_values(0) : out;
        const float* b = rank_values(r);
        if (r + 1 < num_workers) {
          for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
        } else {
          for (size_t i = 0; i < n; ++i) out[i] = (a[i] + b[i]) * scale;
        }
      }
      update = absl::MakeConstSpan(out, n);
    }
    optimizer->Apply(0, static_cast<int64_t>(first), out_value.subspan(first, n), update, lr);
    if (backup != nullptr && update.data() != forward_to + first) {
      std::copy(update.begin(), update.end(), forward_to + first);
    }
  });
}

void ShardPart::AverageIntoValue(ByteChunks grad, int rank) {
  const absl::Span<float> out_value = absl::MakeSpan(WritableValue());
  std::vector<float>& slot = slots[rank];
  slot.resize(out_value.size());
  CopyChunks(grad, slot.data());
  const int num_workers = settings->config.num_workers;
  std::copy(slots[0].begin(), slots[0].end(), out_value.begin());
  if (num_workers == 1) return;
  for (int r = 1; r < num_workers; ++r) {
    const std::vector<float>& s = slots[r];
    for (size_t i = 0; i < out_value.size(); ++i) out_value[i] += s[i];
  }
  const float scale = 1.0f / static_cast<float>(num_workers);
  for (float& v : out_value) v *= scale;
}

PartCheckpoint ShardPart::Checkpoint() const {
  return {id, version, value->data,
          optimizer != nullptr ? optimizer->SaveState(0) : OptimizerState{}};
}

absl::Status ShardPart::Restore(const PartCheckpoint& saved, absl::string_view where) {
  const size_t elements = value->data.size();
  if (saved.value.size() != elements) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " has ", saved.value.size(), " elements; the model's part has ", elements));
  }
  WritableValue() = saved.value;
  version = saved.version;
  if (optimizer == nullptr) return absl::OkStatus();  // auxiliary
  const absl::Status loaded =
      optimizer->LoadState(0, static_cast<int64_t>(elements), saved.optimizer);
  if (!loaded.ok()) return absl::DataLossError(absl::StrCat(where, ": ", loaded.message()));
  return absl::OkStatus();
}

void ShardPart::Answer(PartSink* reply_to) {
  if (backup == nullptr || backed_up_version >= version) {
    reply_to->Send(id, version, value->data, &value->readers);
    return;
  }
  held.push_back({version, reply_to});
}

void ShardPart::Forward(float lr, int rank, int64_t pushed_on) {
  LeaderUpdate update{id, version, lr, {}, rank, pushed_on};
  if (optimizer == nullptr) {
    update.values = rank < 0 ? absl::MakeConstSpan(value->data) : absl::MakeConstSpan(slots[rank]);
  } else {
    update.values = absl::MakeConstSpan(reinterpret_cast<const float*>(forwarded.data()),
                                        forwarded.size() / sizeof(float));
    update.buffer = &forwarded;
  }
  const int64_t forwarded_version = version;
  // Two words: std::function keeps them without allocating.
  backup->Forward(update, [this, forwarded_version] { SendHeldAnswers(forwarded_version); });
}

void ShardPart::SendHeldAnswers(int64_t backed_up) {
  absl::MutexLock lock(&mu);
  backed_up_version = std::max(backed_up_version, backed_up);
  // In the order they were held: dist_sync's rotation of who hears first stays.
  auto kept = held.begin();
  for (HeldAnswer& h : held) {
    if (h.version > backed_up) {
      *kept++ = h;
    } else if (h.sink != nullptr) {
      h.sink->Send(id, version, value->data, &value->readers);
    }
  }
  held.erase(kept, held.end());
}

bool ShardPart::AnsweredAsReplicated(const PartHeader& header, PartSink* reply_to) {
  if (header.rank < 0 || header.rank >= static_cast<int>(replicated_pushes.size())) {
    return false;
  }
  int64_t& replicated = replicated_pushes[header.rank];
  if (replicated < 0 || header.version > replicated) {
    replicated = -1;  // the rank has gone on past what the leader forwarded
    return false;
  }
  Answer(reply_to);
  return true;
}

PartCopy ShardPart::CopyOf(int copy_share) const {
  PartCopy copy;
  copy.share = copy_share;
  copy.config = &settings->config;
  if (optimizer != nullptr) copy.optimizer = optimizer->SaveState(0);
  if (settings->config.mode == KVStoreMode::kDistAsync) {
    copy.pushed_on_by_rank = async_pushed_on;
    if (optimizer == nullptr) copy.latest_pushes = slots;
  } else {
    // dist_sync: version v holds every push computed on the versions before it.
    copy.pushed_on_by_rank.assign(settings->config.num_workers, version - 1);
  }
  return copy;
}

absl::Status ShardPart::TakeCopy(const LeaderUpdate& u, absl::string_view where) {
  const PartCopy& copy = *u.copy;
  const ShardConfig& config = settings->config;
  if (backup != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " came from another shard, but this one leads the part"));
  }
  const size_t workers = static_cast<size_t>(config.num_workers);
  const bool async_auxiliary = config.mode == KVStoreMode::kDistAsync && optimizer == nullptr;
  if (copy.pushed_on_by_rank.size() != workers ||
      (async_auxiliary && copy.latest_pushes.size() != workers)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " names the pushes of ",
                                                   copy.pushed_on_by_rank.size(),
                                                   " ranks; the job has ", workers, " workers"));
  }
  WritableValue().assign(u.values.begin(), u.values.end());
  version = u.version;
  if (optimizer != nullptr) {
    const absl::Status loaded =
        optimizer->LoadState(0, static_cast<int64_t>(u.values.size()), copy.optimizer);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", loaded.message()));
    }
  }
  ResetPushes();
  if (async_auxiliary) slots = copy.latest_pushes;
  if (config.mode == KVStoreMode::kDistAsync) async_pushed_on = copy.pushed_on_by_rank;
  replicated_pushes = copy.pushed_on_by_rank;
  return absl::OkStatus();
}

absl::Status ShardPart::TakeUpdate(const LeaderUpdate& u, absl::FunctionRef<std::string()> where) {
  const ShardConfig& config = settings->config;
  if (backup != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(where(), " came from another shard, but this one leads the part"));
  }
  if (u.version != version + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(where(), " came while its backup is at version ", version,
                     ": a leader's updates must reach the backup each once, in order"));
  }
  const size_t elements = value->data.size();
  if (u.values.size() != elements || u.rank >= config.num_workers ||
      (config.mode == KVStoreMode::kDistAsync) != (u.rank >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), " holds ", u.values.size(), " values of rank ", u.rank,
                     "; the part has ", elements, " elements in a ", KVStoreModeName(config.mode),
                     " job of ", config.num_workers, " workers"));
  }
  if (optimizer == nullptr) {
    if (u.rank < 0) {
      std::copy(u.values.begin(), u.values.end(), WritableValue().begin());
    } else {
      const absl::Span<const char> bytes(reinterpret_cast<const char*>(u.values.data()),
                                         u.values.size() * sizeof(float));
      AverageIntoValue(ByteChunks(&bytes, 1), u.rank);
    }
  } else {
    // In the leader's blocks: the same optimizer calls on the same numbers.
    const absl::Span<float> out_value = absl::MakeSpan(WritableValue());
    optimizer->BeginUpdate(0, static_cast<int64_t>(elements));
    for (size_t first = 0; first < elements; first += kBlockFloats) {
      const size_t n = std::min(kBlockFloats, elements - first);
      optimizer->Apply(0, static_cast<int64_t>(first), out_value.subspan(first, n),
                       u.values.subspan(first, n), u.lr);
    }
  }
  version = u.version;
  if (replicated_pushes.empty()) replicated_pushes.assign(config.num_workers, -1);
  if (u.rank < 0) {
    std::fill(replicated_pushes.begin(), replicated_pushes.end(), u.pushed_on);
  } else {
    replicated_pushes[u.rank] = u.pushed_on;
    async_pushed_on[u.rank] = u.pushed_on;
  }
  return absl::OkStatus();
}

void ShardPart::Detach(PartSink* sink) {
  absl::MutexLock lock(&mu);
  for (PartSink*& w : waiting) {
    if (w == sink) w = nullptr;
  }
  for (HeldAnswer& h : held) {
    if (h.sink == sink) h.sink = nullptr;
  }
}

}  // namespace cohort
