#ifndef COHORT_SERVICES_SHARD_UPDATE_BUFFER_H_
#define COHORT_SERVICES_SHARD_UPDATE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/types/span.h"

namespace cohort {

// Where a stretch of an UpdateBuffer goes back once its update is done with.
class UpdatePool {
 public:
  virtual ~UpdatePool() = default;
  // The stretch at `offset` is free again.
  virtual void GiveBack(int64_t offset) = 0;
};

// The bytes of one update, which a leading shard's optimizer pass writes and its backup link
// takes: heap memory, or a stretch of a pool that the backup maps too (shm_backup_link.h),
// given back to the pool when the buffer goes. Move-only.
class UpdateBuffer {
 public:
  UpdateBuffer() = default;
  // bytes of heap memory (their contents unspecified until written).
  explicit UpdateBuffer(size_t bytes);
  // bytes of `pool`'s memory at `offset`, given back when this buffer goes.
  UpdateBuffer(std::shared_ptr<UpdatePool> pool, int64_t offset, absl::Span<char> bytes);
  // A heap buffer that takes `heap`'s memory.
  static UpdateBuffer FromHeap(std::string heap);
  UpdateBuffer(UpdateBuffer&& other) noexcept;
  UpdateBuffer& operator=(UpdateBuffer&& other) noexcept;
  UpdateBuffer(const UpdateBuffer&) = delete;
  UpdateBuffer& operator=(const UpdateBuffer&) = delete;
  ~UpdateBuffer();

  char* data() { return pool_ != nullptr ? pooled_.data() : heap_.data(); }
  size_t size() const { return pool_ != nullptr ? pooled_.size() : heap_.size(); }
  // The stretch's offset in its pool; -1 for heap memory.
  int64_t pool_offset() const { return pool_ != nullptr ? offset_ : -1; }
  const UpdatePool* pool() const { return pool_.get(); }
  // The heap memory (empty for a pool's stretch), to take by swapping.
  std::string& heap() { return heap_; }

 private:
  void GiveBack();

  std::string heap_;
  std::shared_ptr<UpdatePool> pool_;
  int64_t offset_ = -1;
  absl::Span<char> pooled_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_UPDATE_BUFFER_H_
