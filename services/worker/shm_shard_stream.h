#ifndef COHORT_SERVICES_WORKER_SHM_SHARD_STREAM_H_
#define COHORT_SERVICES_WORKER_SHM_SHARD_STREAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "services/common/deadline_timer.h"
#include "services/wire/shm_rendezvous.h"
#include "services/worker/bulk_stream.h"
#include "services/worker/shard_transport.h"

namespace cohort {

// A channel to the shard at `address` through shared memory, if it is on this host and offers
// one: listening at that address alone, or at every address. Says on stderr why a shard of
// this host gets no channel.
std::optional<ShmChannel> DialSameHost(int shard, const std::string& address);

// The bulk stream to shard `shard` over `channel`'s two rings: pushes are copied into one on
// the writer's thread; a thread of the stream's own reads the answers from the other and hands
// them to `receiver`. A push that waits more than a minute for room ends the stream
// (DeadlineExceeded), as does one too large for the ring (InvalidArgument). Cancelled (or
// destroyed), it closes both rings, which the shard's session sees.
std::unique_ptr<BulkStream> MakeShmShardStream(int shard, ShmChannel channel,
                                               AnswerReceiver* receiver, int64_t fusion_bytes,
                                               absl::Duration fusion_wait, DeadlineTimer* timer);

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_SHM_SHARD_STREAM_H_
