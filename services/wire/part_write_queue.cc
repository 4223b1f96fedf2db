#include "services/wire/part_write_queue.h"

#include <algorithm>

namespace cohort {

void PartWriteQueue::Push(const OutgoingPart& part) {
  const uint64_t priority = (static_cast<uint64_t>(part.header.id.key) << 32) |
                            static_cast<uint32_t>(part.header.id.part);
  const size_t bytes = EncodedBytes(part.header.encoding, part.values.size());
  if (part.pin != nullptr) part.pin->Pin();
  heap_.push_back({priority, bytes, part});
  std::push_heap(heap_.begin(), heap_.end());
  queued_bytes_ += bytes;
}

void PartWriteQueue::PopOne(std::vector<OutgoingPart>* out) {
  std::pop_heap(heap_.begin(), heap_.end());
  out->push_back(heap_.back().part);
  queued_bytes_ -= heap_.back().bytes;
  heap_.pop_back();
}

void PartWriteQueue::Pop(std::vector<OutgoingPart>* out) {
  out->clear();
  const size_t limit = static_cast<size_t>(std::max<int64_t>(fusion_bytes_, 0));
  size_t total = heap_.front().bytes;
  PopOne(out);
  if (total >= limit) return;
  while (!heap_.empty() && total + heap_.front().bytes <= limit) {
    total += heap_.front().bytes;
    PopOne(out);
  }
}

void PartWriteQueue::Clear() {
  for (Queued& q : heap_) {
    if (q.part.pin != nullptr) q.part.pin->Unpin();
  }
  heap_.clear();
  queued_bytes_ = 0;
}

}  // namespace cohort
