// ShardCore's push path: a push checked and decoded, dist_sync's pushes of a version kept
// until the last one comes and summed in rank order, dist_async's applied at once, the update
// at the schedule's learning rate or the one the pushes carry, and the answers.

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/shard/shard_core.h"
#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status ShardCore::Push(int rank, PartId id, int64_t version,
                             absl::Span<const float> grad, PartSink* reply_to,
                             int64_t generation) {
  const absl::Span<const char> bytes(reinterpret_cast<const char*>(grad.data()),
                                     grad.size() * sizeof(float));
  return Push(PartHeader{id, version, rank, generation}, ByteChunks(&bytes, 1), reply_to);
}

absl::Status ShardCore::Push(const PartHeader& header, ByteChunks grad, PartSink* reply_to) {
  ASSIGN_OR_RETURN(PartState * p, FindPart(header.id, "push"));
  absl::MutexLock lock(&p->mu);
  RETURN_IF_ERROR(CheckPush(header, grad, *p));
  p->leads = true;  // a worker pushes here: the part's leader died, if it was another shard
  // Compressed pushes are decoded into this thread's buffer and go on as F32.
  thread_local std::vector<float> decoded;
  absl::Span<const char> decoded_bytes;
  if (header.encoding != WireEncoding::kF32) {
    decoded.resize(p->value->data.size());
    RETURN_IF_ERROR(DecodePush(header, grad, absl::MakeSpan(decoded)));
    decoded_bytes = absl::Span<const char>(reinterpret_cast<const char*>(decoded.data()),
                                           decoded.size() * sizeof(float));
    grad = ByteChunks(&decoded_bytes, 1);
  }
  // Refused, not skipped: in dist_sync every worker's push makes the step, and a NaN means the
  // training diverged (or a worker is broken), which no later step undoes.
  if (!AllFinite(grad)) {
    return Refuse(Rejection::kNonFinite,
                  absl::InvalidArgumentError(absl::StrCat(
                      PushWhere(header), " for version ", header.version,
                      " holds NaN or infinite values: the training diverged on that worker "
                      "(lower --lr, add --warmup_epochs, or check its data)",
                      header.encoding == WireEncoding::kF16
                          ? "; with --gradient_compression=fp16, values beyond 65504 overflow "
                            "(bf16 keeps F32's range)"
                          : "")));
  }
  if (AnsweredAsReplicated(header, p, reply_to)) return absl::OkStatus();
  if (p->settings->config.mode == KVStoreMode::kDistAsync) {
    return PushAsync(header, grad, p, reply_to);
  }
  return PushSync(header, grad, p, reply_to);
}

namespace {

// How a message names a push's learning rate (PartHeader::lr).
std::string RateWords(float lr) {
  return lr >= 0 ? absl::StrCat("learning rate ", lr) : "the schedule's learning rate";
}

}  // namespace

std::string ShardCore::PushWhere(const PartHeader& header) const {
  return absl::StrCat("shard ", shard_rank_.load(), ": worker ", header.rank, "'s push of key ",
                      header.id.key, " part ", header.id.part);
}

absl::Status ShardCore::CheckPush(const PartHeader& header, ByteChunks grad,
                                  const PartState& p) const {
  const ShardConfig& config = p.settings->config;
  // Before the rank: ranks are renumbered from one generation to the next.
  if (header.generation != config.generation) {
    return Refuse(Rejection::kStaleGeneration,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " was made in membership generation ", header.generation,
                      ", but the job's workers changed: it is in generation ", config.generation,
                      " (the worker rejoins the job and pulls)")));
  }
  if (header.rank < 0 || header.rank >= config.num_workers) {
    return Refuse(Rejection::kWrongRank,
                  absl::InvalidArgumentError(absl::StrCat("shard ", shard_rank_.load(),
                                                          ": push from rank ", header.rank,
                                                          " in a job of ", config.num_workers,
                                                          " workers")));
  }
  const size_t bytes = TotalBytes(grad);
  const size_t elements = p.value->data.size();
  if (bytes != EncodedBytes(header.encoding, elements)) {
    return Refuse(Rejection::kWrongSize,
                  absl::InvalidArgumentError(absl::StrCat(
                      PushWhere(header), " has ", bytes, " bytes of ",
                      WireEncodingName(header.encoding), " values; the part has ", elements,
                      " elements (", EncodedBytes(header.encoding, elements), " bytes)")));
  }
  return absl::OkStatus();
}

absl::Status ShardCore::DecodePush(const PartHeader& header, ByteChunks grad,
                                   absl::Span<float> out) const {
  const absl::Status valid = DecodeValues(header.encoding, grad, header.threshold, out);
  if (valid.ok()) return valid;
  return Refuse(Rejection::kMalformed,
                absl::InvalidArgumentError(absl::StrCat(PushWhere(header), ": ", valid.message())));
}

absl::Status ShardCore::PushAsync(const PartHeader& header, ByteChunks grad, PartState* p,
                                  PartSink* reply_to) {
  const Settings& settings = *p->settings;
  // Each push is 1/W of a step: the schedule advances one step per W pushes, as in dist_sync.
  const float lr =
      header.lr >= 0
          ? header.lr
          : static_cast<float>(settings.schedule.At(p->version / settings.config.num_workers));
  // Stale pushes are what asynchronous training accepts; a version never produced is a bug.
  if (header.version > p->version) {
    return Refuse(Rejection::kFutureVersion,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " was computed on version ", header.version,
                      ", which the part has not reached (", p->version, ")")));
  }
  if (p->optimizer == nullptr) {
    AverageIntoValue(p, grad, header.rank, absl::MakeSpan(WritableValue(p)));
  } else {
    ApplyPush(p, grad, header.rank, absl::MakeSpan(WritableValue(p)), lr);
  }
  ++p->version;
  p->async_pushed_on[header.rank] = header.version;
  Applied(p->version, 1);
  MaybeCheckpoint(header.id, p);
  Answer(header.id, p, reply_to);
  if (p->backup != nullptr) Forward(header.id, p, lr, header.rank, header.version);
  return absl::OkStatus();
}

absl::Status ShardCore::PushSync(const PartHeader& header, ByteChunks grad, PartState* p,
                                 PartSink* reply_to) {
  const int rank = header.rank;
  const int num_workers = p->settings->config.num_workers;
  if (header.version != p->version) {
    return Refuse(
        header.version < p->version ? Rejection::kStaleVersion : Rejection::kFutureVersion,
        absl::FailedPreconditionError(absl::StrCat(
            PushWhere(header), " was computed on version ", header.version,
            " but the part is at version ", p->version,
            ": every worker must push every key once per step")));
  }
  if (p->pushed[rank]) {
    return Refuse(Rejection::kDuplicate,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " came twice for version ", header.version)));
  }
  if (p->arrived == 0) {
    p->pushed_lr = header.lr;
  } else if (header.lr != p->pushed_lr) {
    return Refuse(Rejection::kMalformed,
                  absl::FailedPreconditionError(absl::StrCat(
                      PushWhere(header), " asks for ", RateWords(header.lr), " but ",
                      p->arrived, " push(es) of version ", header.version, " before it asked for ",
                      RateWords(p->pushed_lr), ": every worker sets the same rate at the same "
                      "step")));
  }
  p->pushed[rank] = 1;
  p->waiting[rank] = reply_to;
  if (++p->arrived < num_workers) {
    std::vector<float>& slot = p->slots[rank];
    slot.resize(p->value->data.size());
    CopyChunks(grad, slot.data());
    if (ShardMetrics* m = metrics_.load()) m->pulls_waiting.Increment();
    return absl::OkStatus();
  }
  // The last push of the version is reduced and applied straight from its bytes.
  const float lr = p->pushed_lr >= 0 ? p->pushed_lr
                                    : static_cast<float>(p->settings->schedule.At(p->version));
  if (p->optimizer == nullptr) {
    AverageIntoValue(p, grad, rank, absl::MakeSpan(WritableValue(p)));
  } else {
    ApplyPush(p, grad, rank, absl::MakeSpan(WritableValue(p)), lr);
  }
  ++p->version;
  Applied(p->version, num_workers);
  MaybeCheckpoint(header.id, p);
  p->arrived = 0;
  // The answers go out one after another from this thread (each a write of its stream): each
  // update starts them at another rank, so that no worker is always the last to hear (at 1,024
  // workers the last answer leaves about 0.1 s after the first).
  const int first = static_cast<int>(
      ((static_cast<uint64_t>(p->version) * 0x9E3779B97F4A7C15ull) >> 32) % num_workers);
  for (int i = 0; i < num_workers; ++i) {
    const int r = (first + i) % num_workers;
    if (p->waiting[r] != nullptr) Answer(header.id, p, p->waiting[r]);
    p->waiting[r] = nullptr;
    p->pushed[r] = 0;
  }
  if (p->backup != nullptr) Forward(header.id, p, lr, /*rank=*/-1, header.version);
  return absl::OkStatus();
}

std::vector<float>& ShardCore::WritableValue(PartState* p) {
  p->retired.erase(std::remove_if(p->retired.begin(), p->retired.end(),
                                  [](const auto& v) { return v->readers.count() == 0; }),
                   p->retired.end());
  if (p->value->readers.count() > 0) {
    auto fresh = std::make_unique<PinnedValue>();
    fresh->data = p->value->data;
    p->retired.push_back(std::move(p->value));
    p->value = std::move(fresh);
  }
  return p->value->data;
}

absl::Status ShardCore::Refuse(Rejection reason, absl::Status status) const {
  if (ShardMetrics* m = metrics_.load()) m->Reject(reason);
  return status;
}

void ShardCore::Applied(int64_t version, int pushes) {
  ShardMetrics* m = metrics_.load();
  if (m == nullptr) return;
  if (pushes > 0) m->pushes_applied.Increment(pushes);
  if (pushes > 1) m->pulls_waiting.Decrement(pushes - 1);
  int64_t highest = highest_version_.load();
  while (version > highest) {
    if (highest_version_.compare_exchange_weak(highest, version)) {
      m->parameter_version.Set(static_cast<double>(highest_version_.load()));
      return;
    }
  }
}

void ShardCore::ApplyPush(PartState* p, ByteChunks grad, int rank, absl::Span<float> value,
                          float lr) {
  const auto start = std::chrono::steady_clock::now();
  const size_t bytes = value.size() * sizeof(float);
  if (p->backup != nullptr && p->forwarded.size() != bytes) {
    p->forwarded = p->backup->Spare(bytes);
  }
  ApplyPushBlocks(p, grad, rank, value, lr);
  if (ShardMetrics* m = metrics_.load()) {
    m->apply_seconds.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

void ShardCore::ApplyPushBlocks(PartState* p, ByteChunks grad, int rank, absl::Span<float> value,
                                float lr) {
  const ShardConfig& config = p->settings->config;
  const int num_workers = config.num_workers;
  const float scale = 1.0f / static_cast<float>(num_workers);
  // Per gRPC thread: the push's block and the reduced block, both small enough to stay in cache.
  thread_local std::vector<float> block(kBlockFloats), reduced(kBlockFloats);
  float* const forwarded = reinterpret_cast<float*>(p->forwarded.data());
  p->optimizer->BeginUpdate(0, static_cast<int64_t>(value.size()));
  ForEachFloatBlock(grad, absl::MakeSpan(block), [&](size_t first, absl::Span<const float> g) {
    const size_t n = g.size();
    absl::Span<const float> update = g;  // x · 1 == x: W = 1 needs no pass
    // With a backup, the update is made straight where it is forwarded from.
    float* const out = p->backup != nullptr ? forwarded + first : reduced.data();
    if (config.mode == KVStoreMode::kDistAsync && num_workers > 1) {
      for (size_t i = 0; i < n; ++i) out[i] = g[i] * scale;
      update = absl::MakeConstSpan(out, n);
    } else if (num_workers > 1) {
      // Rank order, whatever order the pushes arrived in: ((g0 + g1) + g2 ...) · (1/W), this
      // push read from its block and the others from their slots.
      const auto rank_values = [&](int r) {
        return r == rank ? g.data() : p->slots[r].data() + first;
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
    p->optimizer->Apply(0, static_cast<int64_t>(first), value.subspan(first, n), update, lr);
    if (p->backup != nullptr && update.data() != forwarded + first) {
      std::copy(update.begin(), update.end(), forwarded + first);
    }
  });
}

void ShardCore::AverageIntoValue(PartState* p, ByteChunks grad, int rank,
                                 absl::Span<float> value) {
  std::vector<float>& slot = p->slots[rank];
  slot.resize(value.size());
  CopyChunks(grad, slot.data());
  const int num_workers = p->settings->config.num_workers;
  std::copy(p->slots[0].begin(), p->slots[0].end(), value.begin());
  if (num_workers == 1) return;
  for (int r = 1; r < num_workers; ++r) {
    const std::vector<float>& s = p->slots[r];
    for (size_t i = 0; i < value.size(); ++i) value[i] += s[i];
  }
  const float scale = 1.0f / static_cast<float>(num_workers);
  for (float& v : value) v *= scale;
}

}  // namespace cohort
