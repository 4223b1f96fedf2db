#include "services/shard/update_buffer.h"

#include <utility>

namespace cohort {

UpdateBuffer::UpdateBuffer(size_t bytes) { heap_.resize(bytes); }

UpdateBuffer::UpdateBuffer(std::shared_ptr<UpdatePool> pool, int64_t offset,
                           absl::Span<char> bytes)
    : pool_(std::move(pool)), offset_(offset), pooled_(bytes) {}

UpdateBuffer UpdateBuffer::FromHeap(std::string heap) {
  UpdateBuffer b;
  b.heap_ = std::move(heap);
  return b;
}

UpdateBuffer::UpdateBuffer(UpdateBuffer&& other) noexcept
    : heap_(std::move(other.heap_)),
      pool_(std::move(other.pool_)),
      offset_(other.offset_),
      pooled_(other.pooled_) {
  other.pooled_ = {};
}

UpdateBuffer& UpdateBuffer::operator=(UpdateBuffer&& other) noexcept {
  if (this != &other) {
    GiveBack();
    heap_ = std::move(other.heap_);
    pool_ = std::move(other.pool_);
    offset_ = other.offset_;
    pooled_ = other.pooled_;
    other.pooled_ = {};
  }
  return *this;
}

UpdateBuffer::~UpdateBuffer() { GiveBack(); }

void UpdateBuffer::GiveBack() {
  if (pool_ == nullptr) return;
  pool_->GiveBack(offset_);
  pool_ = nullptr;
  pooled_ = {};
}

}  // namespace cohort
