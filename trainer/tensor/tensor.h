#ifndef COHORT_TRAINER_TENSOR_TENSOR_H_
#define COHORT_TRAINER_TENSOR_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/types/span.h"
#include "trainer/base/check.h"

namespace cohort {

// Element types. F64 is what the reference ops compute in; BF16/F16 are storage types for
// mixed precision (the GPU backend); I32 holds labels.
enum class DType { kF32, kF64, kBF16, kF16, kI32 };

size_t DTypeSize(DType dtype);
// The safetensors spelling: "F32", "F64", "BF16", "F16", "I32".
absl::string_view DTypeName(DType dtype);

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() { return DType::kF32; }
template <>
constexpr DType DTypeOf<double>() { return DType::kF64; }
template <>
constexpr DType DTypeOf<int32_t>() { return DType::kI32; }

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;

  static Device Cpu() { return {}; }
  static Device Cuda(int index) { return {Kind::kCuda, index}; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  std::string ToString() const;  // "cpu", "cuda:0"
};

// Bytes of an allocator's buffers in use now, and the most at once since its peak was last
// reset (0 and 0 where an allocator does not count).
struct MemoryUse {
  int64_t in_use = 0;
  int64_t peak = 0;
};

// Hands out raw memory on one device. The CPU one is the default; a device backend brings
// its own (e.g. a caching CUDA allocator). Implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual Device device() const = 0;
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Copies bytes between memory of this allocator and host memory (either way), or within
  // this allocator's memory; returns when the copy is done and ordered after the device's
  // work already queued.
  virtual void Copy(void* dst, const void* src, size_t bytes);
  virtual void Zero(void* ptr, size_t bytes);
  virtual MemoryUse memory_use() const { return {}; }
  // The peak becomes what is in use now.
  virtual void ResetPeak() {}
};

// 64-byte aligned host memory (cache lines, AVX-512 loads). It counts what is in use: the
// peak of a CPU training step is read from it.
Allocator* CpuAllocator();

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t numel() const;
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  std::string ToString() const;  // "(64, 1, 28, 28)"

 private:
  std::vector<int64_t> dims_;
};

// A dense row-major tensor owning its buffer. Move-only: copies are explicit (CopyFrom).
// Resize keeps the buffer when it is large enough, so per-step tensors are allocated once.
// Not thread-safe.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, DType dtype = DType::kF32, Allocator* allocator = CpuAllocator());
  // A view of memory someone else owns (a numpy array's, for the Python binding; a model's
  // arena): reads and writes go to `data` (row-major, shape's elements of dtype), memory of
  // `allocator`'s device, which must outlive the view; it is never freed, and a Resize past
  // its size is a programmer error.
  static Tensor Borrow(void* data, Shape shape, DType dtype,
                       Allocator* allocator = CpuAllocator());
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return allocator_->device(); }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool empty() const { return numel() == 0; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    COHORT_CHECK(DTypeOf<T>() == dtype_, "tensor %s holds %s", shape_.ToString().c_str(),
                 std::string(DTypeName(dtype_)).c_str());
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return const_cast<Tensor*>(this)->data<T>();
  }
  template <typename T>
  absl::Span<T> span() {
    return absl::Span<T>(data<T>(), static_cast<size_t>(numel()));
  }
  template <typename T>
  absl::Span<const T> span() const {
    return absl::Span<const T>(data<T>(), static_cast<size_t>(numel()));
  }

  // Sets the shape (same dtype), reallocating only when the new size exceeds the buffer.
  // Contents are unspecified afterwards.
  void Resize(const Shape& shape);
  void SetZero();
  // Resizes to src's shape and copies its data (same dtype; host and device in any
  // combination, through the device's allocator).
  void CopyFrom(const Tensor& src);

 private:
  void Release();

  Shape shape_;
  DType dtype_ = DType::kF32;
  Allocator* allocator_ = CpuAllocator();
  void* data_ = nullptr;
  size_t capacity_ = 0;
  bool owned_ = true;  // false: a Borrow view
};

// dst = rows [first, first + n) of host tensor src's leading dimension (dst takes src's dtype;
// its buffer is reused when large enough).
void CopyRows(const Tensor& src, int64_t first, int64_t n, Tensor* dst);

// Element-wise conversions between host tensors of F32, F64, BF16 and F16 (round to nearest
// even), e.g. for tests comparing backends and parameter initialisation.
Tensor ConvertTo(const Tensor& src, DType dtype);

// Whether t lives on the host and holds dtype (usable as it is where host data is needed).
inline bool IsHostTensorOf(const Tensor& t, DType dtype) {
  return t.device().kind == Device::Kind::kCpu && t.dtype() == dtype;
}

// t on the host in the given dtype: a copy off its device when it lives on one, then
// converted (ConvertTo) when the dtypes differ.
Tensor ToHost(const Tensor& t, DType dtype);

// One value in the 16-bit float formats' bits (round to nearest even) and back.
uint16_t FloatToBf16(float v);
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToF16(float v);
float F16ToFloat(uint16_t bits);

}  // namespace cohort

#endif  // COHORT_TRAINER_TENSOR_TENSOR_H_
