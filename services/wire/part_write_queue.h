#ifndef COHORT_SERVICES_WIRE_PART_WRITE_QUEUE_H_
#define COHORT_SERVICES_WIRE_PART_WRITE_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "services/wire/part_id.h"

namespace cohort {

// The part messages waiting to go out on one stream (gRPC allows one write in flight per
// stream), most urgent first: model order, key then part, so the layers the next forward needs
// first travel first. Not thread-safe: the stream's owner locks around it.
class PartWriteQueue {
 public:
  void Push(PartId id, grpc::ByteBuffer message) {
    heap_.push_back({Priority(id), std::move(message)});
    std::push_heap(heap_.begin(), heap_.end());
  }
  bool empty() const { return heap_.empty(); }
  // Moves the most urgent message out. Not empty.
  grpc::ByteBuffer Pop() {
    std::pop_heap(heap_.begin(), heap_.end());
    grpc::ByteBuffer message = std::move(heap_.back().message);
    heap_.pop_back();
    return message;
  }
  // Drops every message (releasing what they hold).
  void Clear() { heap_.clear(); }

 private:
  struct Queued {
    uint64_t priority;
    grpc::ByteBuffer message;
    bool operator<(const Queued& o) const { return priority > o.priority; }  // min-heap
  };
  static uint64_t Priority(PartId id) {
    return (static_cast<uint64_t>(id.key) << 32) | static_cast<uint32_t>(id.part);
  }

  std::vector<Queued> heap_;  // capacity kept from step to step
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PART_WRITE_QUEUE_H_
