#include "services/wire/ring_stream.h"

#include <algorithm>

namespace cohort {
namespace {

constexpr char kStreamEnd = 0;  // a PartBatch begins with its first field's tag, never 0

}  // namespace

absl::Status RingBatchWriter::Write(ShmRing& ring, absl::Span<const OutgoingPart> parts,
                                    absl::Duration timeout) {
  LayOutBatch(parts, &scratch_, &pieces_);
  last_bytes_ = TotalBytes(pieces_);
  const absl::Status written = ring.Write(pieces_, timeout);
  for (const OutgoingPart& p : parts) {
    if (p.pin != nullptr) p.pin->Unpin();
  }
  return written;
}

absl::Status WriteStreamEnd(ShmRing& ring, const absl::Status& why) {
  // The text is cut to what any ring holds.
  const std::string text(why.message().substr(0, 2048));
  const char head[2] = {kStreamEnd, static_cast<char>(why.code())};
  const absl::Span<const char> pieces[] = {absl::Span<const char>(head, 2),
                                           absl::Span<const char>(text.data(), text.size())};
  return ring.Write(pieces);
}

std::optional<absl::Status> StreamEnd(ByteChunks message) {
  const auto first = std::find_if(message.begin(), message.end(),
                                  [](absl::Span<const char> c) { return !c.empty(); });
  if (first == message.end() || first->front() != kStreamEnd) return std::nullopt;
  std::string all(TotalBytes(message), '\0');
  CopyChunks(message, all.data());
  if (all.size() < 2) return std::nullopt;
  return absl::Status(static_cast<absl::StatusCode>(static_cast<unsigned char>(all[1])),
                      all.substr(2));
}

}  // namespace cohort
