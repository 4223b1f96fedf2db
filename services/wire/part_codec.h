#ifndef COHORT_SERVICES_WIRE_PART_CODEC_H_
#define COHORT_SERVICES_WIRE_PART_CODEC_H_

#include <cstdint>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/shard.pb.h"
#include "services/wire/byte_chunks.h"
#include "services/wire/part_id.h"
#include "services/wire/pin_count.h"

namespace cohort {

// A parameter part on the wire (Contracts, "Parts on the wire"): the header (key, part index,
// version, membership generation, dtype F32, byte count, pushing rank) and the values' bytes.
// The message is reused: its buffers are kept across calls.
void EncodePart(PartId id, int64_t version, int rank, absl::Span<const float> values,
                v1::Part* out);

// Checks the header against the data and copies the values into out (resized). Errors name
// the key and part.
absl::StatusOr<PartHeader> DecodePart(const v1::Part& part, std::vector<float>* out);

// The bulk path (the PushPull stream) without copying values: the same v1::Part on the wire,
// built as a small encoded header followed by a slice aliasing `values`. With pin, values are
// not copied: pin is held until gRPC has written them, and the caller must not change them
// before pin->WaitUnpinned(). Without pin, they are copied.
grpc::ByteBuffer SerializePart(PartId id, int64_t version, int rank,
                               absl::Span<const float> values, PinCount* pin,
                               int64_t generation = 0);

// A part received on the bulk path, its values left in the transport's slices. Reused from
// message to message (it keeps its buffers).
class ReceivedPart {
 public:
  // Takes the message's slices and checks the header as DecodePart does (header() holds what
  // it said even when the check fails). A message whose fields are laid out otherwise (any
  // valid v1::Part) is parsed by protobuf instead.
  absl::Status Parse(grpc::ByteBuffer* message);
  const PartHeader& header() const { return header_; }
  // The values' bytes, in order.
  ByteChunks chunks() const { return chunks_; }
  size_t bytes() const { return bytes_; }
  // Releases the slices.
  void Clear();

 private:
  // The common layout: field 1 (header), then field 2 (data). False if it is not that.
  bool ParseFast(size_t total);

  PartHeader header_;
  size_t bytes_ = 0;
  std::vector<grpc::Slice> slices_;
  std::vector<absl::Span<const char>> chunks_;
  v1::PartHeader wire_header_;
  v1::Part fallback_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PART_CODEC_H_
