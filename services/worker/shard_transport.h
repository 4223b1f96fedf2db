#ifndef COHORT_SERVICES_WORKER_SHARD_TRANSPORT_H_
#define COHORT_SERVICES_WORKER_SHARD_TRANSPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/wire/byte_chunks.h"
#include "services/wire/part_id.h"
#include "services/wire/pin_count.h"
#include "services/wire/shard_config.h"

namespace cohort {

// A shard's answer to a push: the part's value at header.version, its bytes in
// header.encoding.
struct Answer {
  PartHeader header;
  ByteChunks values;
};

// Where a worker's shard streams deliver what they receive.
class AnswerReceiver {
 public:
  virtual ~AnswerReceiver() = default;
  // Shard `shard` answered pushes: the answers of one message (the parts the shard fused), in
  // order, their bytes valid only during the call. One shard's messages come one at a time, in
  // its stream's order.
  virtual void OnAnswers(int shard, absl::Span<const Answer> answers) = 0;
  // Shard `shard`'s stream ended (OK: the shard closed it; else why, e.g. an answer that could
  // not be parsed, or Unavailable when the shard went away). Once per stream, after its last
  // OnAnswers.
  virtual void OnStreamEnd(int shard, const absl::Status& status) = 0;
};

// A part's initial value, as rank 0 sends it.
struct InitialPart {
  PartId id;
  absl::Span<const float> value;
  bool backup = false;  // replicated shards: another shard leads it, this one backs it up
  int share = 0;        // the shard whose share of the model it is (the partition map's)
};

// The worker's data path to the parameter shards, without the kvstore's logic: the gRPC streams
// and stubs in a process (grpc_shard_transport.h), a fake in tests. The kvstore calls Init and
// Pull from its caller's thread; Send from that thread too, and Close once.
class ShardTransport {
 public:
  virtual ~ShardTransport() = default;

  virtual int num_shards() const = 0;
  // How messages name the shard (its address).
  virtual std::string shard_address(int shard) const = 0;

  // Rank 0, before Open: the shard's settings, then its parts' initial values (version 0).
  // Returns the step of the checkpoint the shard resumed from (which then replaces the values
  // sent), or -1 when its parts start from the values sent.
  virtual absl::StatusOr<int64_t> InitShard(int shard, const ShardConfig& config,
                                            absl::Span<const InitialPart> parts) = 0;
  // Rank 0, while no stream is open: the shard goes back to its part of the checkpoint at
  // `step` (another shard died and came back from it; or, with next, an elastic job's workers
  // changed and the shard goes on under the next generation).
  virtual absl::Status RollBack(int shard, int64_t step,
                                const std::optional<Regeneration>& next = std::nullopt) = 0;
  // What the shard could roll back to.
  virtual absl::StatusOr<ShardCheckpoints> ListCheckpoints(int shard) = 0;
  // After Close: the shards are at these addresses now (one came back, or the same ones);
  // Open opens new streams.
  virtual void Redial(std::vector<std::string> addresses) = 0;
  // Opens one bulk stream per shard; answers and stream ends go to receiver until Close.
  virtual void Open(AnswerReceiver* receiver) = 0;
  // Replicated shards: shard `shard`'s stream ended (it died) and another shard leads its parts
  // now, at `address`: a new stream to it takes the old one's place, answers to receiver. The
  // caller's thread, while the other streams stay open.
  virtual void Reopen(int shard, const std::string& address, AnswerReceiver* receiver) = 0;
  // Queues a push on shard's stream: the gradient of the header's part, computed on its
  // version by its rank in its generation, to travel in the header's encoding. The transport
  // reads part.values (and for 2-bit updates part.residual) until it is done with them,
  // holding part.pin (PinCount::Pin) meanwhile. Pushes go out in model order, small ones
  // fused. After the stream ended, or after Close, the push is dropped (OnStreamEnd has said,
  // or will say, why).
  virtual void Send(int shard, const OutgoingPart& part) = 0;
  // Sends the pushes queued now without waiting for more to fuse them with: the caller is
  // about to wait for answers (or for other workers, who may wait for these pushes).
  virtual void Flush() = 0;
  // Ends every stream and waits until none calls the receiver any more. Idempotent.
  virtual void Close() = 0;
  // Asks the shard for the part's current value outside the streams: its header, the values
  // in out (resized). Unavailable when the shard cannot be reached.
  virtual absl::StatusOr<PartHeader> Pull(int shard, PartId id, std::vector<float>* out) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_SHARD_TRANSPORT_H_
