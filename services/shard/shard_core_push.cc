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
  ASSIGN_OR_RETURN(ShardPart * p, FindPart(header.id, "push"));
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
  if (p->AnsweredAsReplicated(header, reply_to)) return absl::OkStatus();
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
                                  const ShardPart& p) const {
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

absl::Status ShardCore::PushAsync(const PartHeader& header, ByteChunks grad, ShardPart* p,
                                  PartSink* reply_to) {
  const PartSettings& settings = *p->settings;
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
  Update(p, grad, header.rank, lr);
  ++p->version;
  p->async_pushed_on[header.rank] = header.version;
  Applied(p->version, 1);
  MaybeCheckpoint(p);
  p->Answer(reply_to);
  if (p->backup != nullptr) p->Forward(lr, header.rank, header.version);
  return absl::OkStatus();
}

absl::Status ShardCore::PushSync(const PartHeader& header, ByteChunks grad, ShardPart* p,
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
  Update(p, grad, rank, lr);
  ++p->version;
  Applied(p->version, num_workers);
  MaybeCheckpoint(p);
  p->arrived = 0;
  // The answers go out one after another from this thread (each a write of its stream): each
  // update starts them at another rank, so that no worker is always the last to hear (at 1,024
  // workers the last answer leaves about 0.1 s after the first).
  const int first = static_cast<int>(
      ((static_cast<uint64_t>(p->version) * 0x9E3779B97F4A7C15ull) >> 32) % num_workers);
  for (int i = 0; i < num_workers; ++i) {
    const int r = (first + i) % num_workers;
    if (p->waiting[r] != nullptr) p->Answer(p->waiting[r]);
    p->waiting[r] = nullptr;
    p->pushed[r] = 0;
  }
  if (p->backup != nullptr) p->Forward(lr, /*rank=*/-1, header.version);
  return absl::OkStatus();
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

void ShardCore::Update(ShardPart* p, ByteChunks grad, int rank, float lr) {
  if (p->optimizer == nullptr) {
    p->AverageIntoValue(grad, rank);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  p->ApplyPush(grad, rank, lr);
  if (ShardMetrics* m = metrics_.load()) {
    m->apply_seconds.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

}  // namespace cohort
