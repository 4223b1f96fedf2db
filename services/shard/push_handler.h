#ifndef COHORT_SERVICES_SHARD_PUSH_HANDLER_H_
#define COHORT_SERVICES_SHARD_PUSH_HANDLER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "services/shard/shard_core.h"
#include "services/wire/part_codec.h"
#include "services/wire/wire_encoding.h"

namespace cohort {

// One worker's bulk stream as the core sees it, whatever carries it (gRPC, a shared-memory
// ring): where its answers go, and in what encoding.
class PushStream : public PartSink {
 public:
  // Set at the stream's first push (AnswerEncoding of its encoding), before any answer.
  virtual void SetAnswerEncoding(WireEncoding encoding) = 0;
};

// An answer (PartSink::Send's) as a stream queues it: it carries no rank or generation.
inline OutgoingPart AnswerPart(PartId id, int64_t version, absl::Span<const float> value,
                               PinCount* pin, WireEncoding encoding) {
  return OutgoingPart{PartHeader{id, version, /*rank=*/-1, /*generation=*/0, encoding}, value,
                      pin};
}

// Answers queued for one worker past which its stream's pushes are no longer read (they resume
// at half): a slow reader cannot grow the shard's memory.
inline constexpr size_t kMaxQueuedAnswerBytes = 64 << 20;

// What a stream does with each message of pushes: counts it, checks every part (one rank per
// stream; none from a stream opened before the shard rolled back) and hands it to the core,
// which answers through the stream. Belongs to the stream's reading thread.
class PushHandler {
 public:
  // peer: who is at the other end, for errors.
  PushHandler(ShardCore* core, std::string peer);

  // A message of `bytes` bytes, parsed (or not: `parsed`) into `batch`. An error refuses the
  // message (logged here) and should end the stream; it names the peer, worker and part.
  absl::Status Handle(size_t bytes, const absl::Status& parsed, const ReceivedBatch& batch,
                      PushStream* stream);
  const std::string& peer() const { return peer_; }

 private:
  absl::Status Check(size_t bytes, const absl::Status& parsed, const ReceivedBatch& batch,
                     PushStream* stream);
  absl::Status HandlePart(const PartHeader& h, ByteChunks values, ShardMetrics* metrics,
                          PushStream* stream);

  ShardCore* const core_;
  const std::string peer_;
  const int64_t rollbacks_;  // the shard's when the stream opened
  int rank_ = -1;            // the first push's
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_PUSH_HANDLER_H_
