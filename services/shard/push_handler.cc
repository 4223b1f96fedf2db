#include "services/shard/push_handler.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"

namespace cohort {

PushHandler::PushHandler(ShardCore* core, std::string peer)
    : core_(core), peer_(std::move(peer)), rollbacks_(core->rollbacks()) {}

absl::Status PushHandler::Handle(size_t bytes, const absl::Status& parsed,
                                 const ReceivedBatch& batch, PushStream* stream) {
  absl::Status status = Check(bytes, parsed, batch, stream);
  if (!status.ok()) {
    std::cerr << status.message() << " (refused; peer " << peer_ << ")\n" << std::flush;
  }
  return status;
}

absl::Status PushHandler::Check(size_t bytes, const absl::Status& parsed,
                                const ReceivedBatch& batch, PushStream* stream) {
  ShardMetrics* metrics = core_->metrics();
  if (metrics != nullptr) metrics->received_bytes.Increment(static_cast<double>(bytes));
  if (!parsed.ok()) {
    if (metrics != nullptr) metrics->Reject(Rejection::kMalformed);
    return absl::Status(parsed.code(),
                        absl::StrCat("shard: a push from ", peer_, ": ", parsed.message()));
  }
  if (metrics != nullptr) {
    metrics->received_messages.Increment();
    metrics->received_parts.Increment(static_cast<double>(batch.size()));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    RETURN_IF_ERROR(HandlePart(batch.header(i), batch.chunks(i), metrics, stream));
  }
  return absl::OkStatus();
}

absl::Status PushHandler::HandlePart(const PartHeader& h, ByteChunks values,
                                     ShardMetrics* metrics, PushStream* stream) {
  if (rank_ < 0) {
    rank_ = h.rank;
    stream->SetAnswerEncoding(AnswerEncoding(h.encoding));
  }
  if (h.rank != rank_) {
    if (metrics != nullptr) metrics->Reject(Rejection::kWrongRank);
    return absl::InvalidArgumentError(absl::StrCat(
        "shard: the stream of worker ", rank_, " carried a push claiming rank ", h.rank,
        " (key ", h.id.key, " part ", h.id.part, "); each worker pushes on its own stream"));
  }
  if (core_->rollbacks() != rollbacks_) {
    if (metrics != nullptr) metrics->Reject(Rejection::kRolledBack);
    return absl::FailedPreconditionError(absl::StrCat(
        "shard: worker ", h.rank, "'s push of key ", h.id.key, " part ", h.id.part,
        " came on a stream opened before the shard rolled back to step ", core_->start_step(),
        "; pushes after a roll back come on new streams"));
  }
  return core_->Push(h, values, stream);
}

}  // namespace cohort
