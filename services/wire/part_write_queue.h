#ifndef COHORT_SERVICES_WIRE_PART_WRITE_QUEUE_H_
#define COHORT_SERVICES_WIRE_PART_WRITE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "services/wire/part_codec.h"
#include "services/wire/part_id.h"

namespace cohort {

// Fused messages of up to 256 KiB: docs/benchmarks.md, "Small tensors", measured 64 KiB to
// 2 MiB on loopback and on a 1 Gbit/s link.
inline constexpr int64_t kDefaultFusionBytes = 256 << 10;

// The parts waiting to go out on one stream (gRPC allows one write in flight per stream), most
// urgent first: model order, key then part, so the layers the next forward needs first travel
// first. Parts queued while a write is in flight leave together: parts smaller than
// fusion_bytes are fused, most urgent first, into one message of at most fusion_bytes (the
// time bound of fusion is the write before it); larger ones, and every part with fusion_bytes
// 0, leave one a message. Not thread-safe: the stream's owner locks around it.
class PartWriteQueue {
 public:
  explicit PartWriteQueue(int64_t fusion_bytes = 0) : fusion_bytes_(fusion_bytes) {}
  void set_fusion_bytes(int64_t fusion_bytes) { fusion_bytes_ = fusion_bytes; }

  // Queues the part, holding its pin (if any) until it is popped or dropped.
  void Push(const OutgoingPart& part);
  bool empty() const { return heap_.empty(); }
  // The bytes of the values queued (as they will travel).
  size_t queued_bytes() const { return queued_bytes_; }
  // Moves the next message's parts to out (cleared first), their pins with them
  // (SerializeBatch releases them). Not empty.
  void Pop(std::vector<OutgoingPart>* out);
  // Drops every part, releasing their pins.
  void Clear();

 private:
  struct Queued {
    uint64_t priority;
    size_t bytes;  // encoded
    OutgoingPart part;
    bool operator<(const Queued& o) const { return priority > o.priority; }  // min-heap
  };
  void PopOne(std::vector<OutgoingPart>* out);

  int64_t fusion_bytes_;
  std::vector<Queued> heap_;  // capacity kept from step to step
  size_t queued_bytes_ = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PART_WRITE_QUEUE_H_
