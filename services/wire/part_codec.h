#ifndef COHORT_SERVICES_WIRE_PART_CODEC_H_
#define COHORT_SERVICES_WIRE_PART_CODEC_H_

#include <cstdint>
#include <string>
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

class ChunkCursor;  // part_codec.cc's reader of a message's chunks

// A parameter part on the wire (Contracts, "Parts on the wire"): the header (key, part index,
// version, membership generation, dtype, byte count, pushing rank) and the values' bytes.
// The message is reused: its buffers are kept across calls. F32 only (Init and Pull).
void EncodePart(PartId id, int64_t version, int rank, absl::Span<const float> values,
                v1::Part* out);

// Checks the header against the data and copies the values into out (resized). Errors name
// the key and part.
absl::StatusOr<PartHeader> DecodePart(const v1::Part& part, std::vector<float>* out);

// Parts of at least this many F32 bytes travel without copying: their message aliases them.
inline constexpr size_t kAliasBytes = 64 << 10;

// One v1::PartBatch message of the parts, in order. Each part's values are encoded into the
// message, except an F32 part of kAliasBytes or more with a pin, whose message aliases them
// (the pin is held until gRPC has written them). Releases each part's pin (it took them over).
grpc::ByteBuffer SerializeBatch(absl::Span<const OutgoingPart> parts);

// The same message's bytes, for a carrier that copies them at once (a shared-memory ring):
// pieces, in order, of framing and encoded values in scratch (resized) and of F32 values where
// they lie, valid while both are. Leaves the parts' pins alone: hold them until the copy.
void LayOutBatch(absl::Span<const OutgoingPart> parts, std::string* scratch,
                 std::vector<absl::Span<const char>>* pieces);

// A v1::PartBatch received on the bulk path, its parts' values left in the transport's slices.
// Reused from message to message (it keeps its buffers).
class ReceivedBatch {
 public:
  // Takes the message's slices and reads every part's header, checking each as DecodePart does
  // (its dtype known, its byte count the data's). Fields may come in any order.
  absl::Status Parse(grpc::ByteBuffer* message);
  // The same from a message's bytes where they lie (a shared-memory ring's message), which must
  // stay valid until Clear.
  absl::Status Parse(ByteChunks message);
  size_t size() const { return parts_.size(); }
  const PartHeader& header(size_t i) const { return parts_[i].header; }
  // Part i's values' bytes, in order.
  ByteChunks chunks(size_t i) const {
    return ByteChunks(chunks_.data() + parts_[i].first_chunk, parts_[i].num_chunks);
  }
  // Releases the slices (or forgets the message's bytes).
  void Clear();

 private:
  struct Received {
    PartHeader header;
    size_t first_chunk = 0;
    size_t num_chunks = 0;
  };
  absl::Status ParseChunks(ByteChunks message);
  absl::Status ParsePart(ChunkCursor* in, size_t end);

  std::vector<grpc::Slice> slices_;
  std::vector<absl::Span<const char>> slice_chunks_;  // slices_' bytes
  std::vector<absl::Span<const char>> chunks_;
  std::vector<Received> parts_;
  v1::PartHeader wire_header_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PART_CODEC_H_
