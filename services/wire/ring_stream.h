#ifndef COHORT_SERVICES_WIRE_RING_STREAM_H_
#define COHORT_SERVICES_WIRE_RING_STREAM_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "services/wire/byte_chunks.h"
#include "services/wire/part_codec.h"
#include "services/wire/shm_ring.h"

namespace cohort {

// A bulk stream's messages over a shared-memory ring, as over gRPC: each a cohort.v1.PartBatch
// (part_codec.h), and at most one last message saying why the sender ended the stream (a first
// byte no PartBatch starts with, the status code, the text).

// Writes one batch's parts into a ring, in their wire encodings. Keeps its buffers from one
// batch to the next; one writer per ring.
class RingBatchWriter {
 public:
  // Copies the parts into `ring` as one message (waiting up to `timeout` for room), then
  // releases their pins.
  absl::Status Write(ShmRing& ring, absl::Span<const OutgoingPart> parts,
                     absl::Duration timeout = absl::InfiniteDuration());
  // The last message's bytes.
  size_t last_bytes() const { return last_bytes_; }

 private:
  size_t last_bytes_ = 0;
  std::string scratch_;
  std::vector<absl::Span<const char>> pieces_;
};

// The stream's last message: why it ended (not OK: the other side reports it).
absl::Status WriteStreamEnd(ShmRing& ring, const absl::Status& why);
// The status a stream-end message carries; nullopt for a batch.
std::optional<absl::Status> StreamEnd(ByteChunks message);

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_RING_STREAM_H_
