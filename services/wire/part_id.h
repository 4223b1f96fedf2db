#ifndef COHORT_SERVICES_WIRE_PART_ID_H_
#define COHORT_SERVICES_WIRE_PART_ID_H_

#include <cstdint>
#include <utility>

#include "absl/types/span.h"
#include "services/wire/pin_count.h"
#include "services/wire/wire_encoding.h"

namespace cohort {

// A parameter part: the tensor's key and the part's index within it (trainer/kvstore/partition.h).
struct PartId {
  int64_t key = 0;
  int part = 0;
  bool operator==(const PartId& o) const { return key == o.key && part == o.part; }
  template <typename H>
  friend H AbslHashValue(H h, const PartId& p) {
    return H::combine(std::move(h), p.key, p.part);
  }
};

// What a part's header says besides its byte count (Contracts, "Parts on the wire").
struct PartHeader {
  PartId id;
  int64_t version = 0;  // the value's version, or the one a pushed gradient was computed on
  int rank = -1;        // the pushing worker; -1 on a shard's answer
  // The job's membership generation the push was made in (elastic jobs move it on when their
  // workers change; a shard refuses pushes of another generation).
  int64_t generation = 0;
  // How the values travel (--gradient_compression), and for kTwoBit what a code stands for.
  WireEncoding encoding = WireEncoding::kF32;
  float threshold = 0;
  // A push: the learning rate to update with in place of the shards' schedule (negative: the
  // schedule's).
  float lr = -1;
};

// A part to send on the bulk path (the PushPull stream): its header (the encoding included),
// its F32 values, encoded as the header says when the message is built, and for kTwoBit the
// worker's residual (error feedback; values.size()). pin, when given, is held (Pin) by whoever
// holds the part and released once its values are no longer read.
struct OutgoingPart {
  PartHeader header;
  absl::Span<const float> values;
  PinCount* pin = nullptr;
  float* residual = nullptr;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PART_ID_H_
