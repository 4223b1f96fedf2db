#include "trainer/ops/cuda/device_allocator.h"

#include <algorithm>

#include "trainer/ops/cuda/cuda_check.h"

namespace cohort::cuda {
namespace {

constexpr size_t kSmall = size_t{1} << 20;
// A cached block serves a request at most this many times smaller, so one huge freed buffer
// is not spent on a tiny one.
constexpr size_t kMaxWaste = 2;

}  // namespace

size_t CachingDeviceAllocator::RoundUp(size_t bytes) {
  const size_t step = bytes < kSmall ? 512 : 2 * kSmall;
  return (std::max<size_t>(bytes, 1) + step - 1) / step * step;
}

CachingDeviceAllocator::CachingDeviceAllocator(int device, cudaStream_t stream)
    : device_(device), stream_(stream) {}

CachingDeviceAllocator::~CachingDeviceAllocator() {
  ReleaseCached();
  absl::MutexLock lock(&mu_);
  // Tensors outliving their backend are a bug elsewhere; their memory goes back anyway.
  for (const auto& [ptr, size] : in_use_) cudaFree(ptr);
}

void* CachingDeviceAllocator::Allocate(size_t bytes) {
  const size_t size = RoundUp(bytes);
  absl::MutexLock lock(&mu_);
  auto it = cached_.lower_bound(size);
  if (it != cached_.end() && it->first <= size * kMaxWaste) {
    void* ptr = it->second;
    in_use_[ptr] = it->first;
    stats_.bytes_in_use += it->first;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    cached_.erase(it);
    ++stats_.cache_hits;
    return ptr;
  }
  // cudaMalloc allocates on the calling thread's current device, which may be another GPU's.
  int current = 0;
  COHORT_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) COHORT_CUDA_CHECK(cudaSetDevice(device_));
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size);
  if (err == cudaErrorMemoryAllocation && !cached_.empty()) {
    // Out of memory with blocks cached: give them back and try once more.
    cudaGetLastError();
    COHORT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (const auto& [block_size, block] : cached_) {
      cudaFree(block);
      stats_.bytes_reserved -= block_size;
    }
    cached_.clear();
    err = cudaMalloc(&ptr, size);
  }
  if (current != device_) COHORT_CUDA_CHECK(cudaSetDevice(current));
  COHORT_CHECK(err == cudaSuccess, "cuda:%d: cannot allocate %zu bytes (%zu in use): %s", device_,
               size, stats_.bytes_in_use, cudaGetErrorString(err));
  in_use_[ptr] = size;
  ++stats_.driver_allocations;
  stats_.bytes_reserved += size;
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingDeviceAllocator::Free(void* ptr) {
  absl::MutexLock lock(&mu_);
  auto it = in_use_.find(ptr);
  COHORT_CHECK(it != in_use_.end(), "cuda:%d: freeing %p, which this allocator did not hand out",
               device_, ptr);
  stats_.bytes_in_use -= it->second;
  cached_.emplace(it->second, ptr);
  in_use_.erase(it);
}

void CachingDeviceAllocator::Copy(void* dst, const void* src, size_t bytes) {
  COHORT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  COHORT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CachingDeviceAllocator::Zero(void* ptr, size_t bytes) {
  COHORT_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
}

CachingDeviceAllocator::Stats CachingDeviceAllocator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

MemoryUse CachingDeviceAllocator::memory_use() const {
  absl::MutexLock lock(&mu_);
  return {static_cast<int64_t>(stats_.bytes_in_use),
          static_cast<int64_t>(stats_.peak_bytes_in_use)};
}

void CachingDeviceAllocator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CachingDeviceAllocator::ReleaseCached() {
  cudaStreamSynchronize(stream_);
  absl::MutexLock lock(&mu_);
  for (const auto& [size, ptr] : cached_) {
    cudaFree(ptr);
    stats_.bytes_reserved -= size;
  }
  cached_.clear();
}

void* PinnedHostAllocator::Allocate(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t err = cudaHostAlloc(&ptr, std::max<size_t>(bytes, 1), cudaHostAllocPortable);
  COHORT_CHECK(err == cudaSuccess, "cannot allocate %zu bytes of pinned host memory: %s", bytes,
               cudaGetErrorString(err));
  return ptr;
}

void PinnedHostAllocator::Free(void* ptr) { COHORT_CUDA_CHECK(cudaFreeHost(ptr)); }

PinnedHostAllocator* PinnedAllocator() {
  static PinnedHostAllocator* const allocator = new PinnedHostAllocator();
  return allocator;
}

bool IsPinned(const void* ptr) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // plain pageable memory may report an error on some drivers
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace cohort::cuda
