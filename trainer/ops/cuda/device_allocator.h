#ifndef COHORT_TRAINER_OPS_CUDA_DEVICE_ALLOCATOR_H_
#define COHORT_TRAINER_OPS_CUDA_DEVICE_ALLOCATOR_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "trainer/tensor/tensor.h"

namespace cohort::cuda {

// Device memory for the tensors of one GPU context, whose work runs in order on one stream.
// Freed blocks are kept, by size, and handed out again instead of going back to the driver, so
// once a training step has run, the next ones allocate nothing (cudaMalloc synchronises the
// device and costs far more than a kernel). A block freed while the stream still uses it is
// safe to hand out again: its next user's work is queued behind on the same stream.
// Thread-safe.
class CachingDeviceAllocator final : public Allocator {
 public:
  // stream: the context's compute stream, which Copy and Zero are ordered on.
  CachingDeviceAllocator(int device, cudaStream_t stream);
  ~CachingDeviceAllocator() override;

  Device device() const override { return Device::Cuda(device_); }
  void* Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  // Ordered on the stream; Copy returns once its copy is done, Zero once it is queued.
  void Copy(void* dst, const void* src, size_t bytes) override;
  void Zero(void* ptr, size_t bytes) override;

  struct Stats {
    int64_t driver_allocations = 0;  // cudaMalloc calls so far
    int64_t cache_hits = 0;          // allocations served from freed blocks
    size_t bytes_reserved = 0;       // held from the driver, in use or cached
    size_t bytes_in_use = 0;
    size_t peak_bytes_in_use = 0;  // since the last ResetPeak
  };
  Stats stats() const;
  MemoryUse memory_use() const override;
  void ResetPeak() override;
  // Returns the cached blocks to the driver (after the stream's work is done).
  void ReleaseCached();

  // Rounded block size: 512 B steps below 1 MiB, 2 MiB steps above, so buffers whose size
  // varies a little (the last batch of an epoch) reuse the same blocks.
  static size_t RoundUp(size_t bytes);

 private:
  const int device_;
  const cudaStream_t stream_;
  mutable absl::Mutex mu_;
  std::multimap<size_t, void*> cached_ ABSL_GUARDED_BY(mu_);         // by block size
  absl::flat_hash_map<void*, size_t> in_use_ ABSL_GUARDED_BY(mu_);  // block → size
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// Page-locked host memory, for buffers the GPU copies from or into without staging
// (gradients leaving for the kvstore, input batches). Its tensors are host tensors.
// Thread-safe.
class PinnedHostAllocator final : public Allocator {
 public:
  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override;
  void Free(void* ptr) override;
};

PinnedHostAllocator* PinnedAllocator();

// Whether ptr is page-locked host memory the GPU reaches directly.
bool IsPinned(const void* ptr);

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_DEVICE_ALLOCATOR_H_
