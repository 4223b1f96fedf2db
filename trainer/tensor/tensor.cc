#include "trainer/tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF64: return "F64";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kI32: return "I32";
  }
  return "?";
}

std::string Device::ToString() const {
  return kind == Kind::kCpu ? std::string("cpu") : absl::StrCat("cuda:", index);
}

namespace {

class AlignedCpuAllocator final : public Allocator {
 public:
  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    COHORT_CHECK(p != nullptr, "out of host memory allocating %zu bytes", bytes);
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
};

}  // namespace

Allocator* CpuAllocator() {
  static AlignedCpuAllocator* const allocator = new AlignedCpuAllocator();
  return allocator;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::string Shape::ToString() const { return absl::StrCat("(", absl::StrJoin(dims_, ", "), ")"); }

Tensor::Tensor(Shape shape, DType dtype, Allocator* allocator)
    : dtype_(dtype), allocator_(allocator) {
  Resize(shape);
}

Tensor::~Tensor() { Release(); }

Tensor::Tensor(Tensor&& other) noexcept { *this = std::move(other); }

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    Release();
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
    allocator_ = other.allocator_;
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.shape_ = Shape();
    other.data_ = nullptr;
    other.capacity_ = 0;
  }
  return *this;
}

void Tensor::Release() {
  if (data_ != nullptr) allocator_->Free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

void Tensor::Resize(const Shape& shape) {
  for (int64_t d : shape.dims()) COHORT_CHECK(d >= 0, "negative dimension in %s", shape.ToString().c_str());
  shape_ = shape;
  const size_t bytes = nbytes();
  if (bytes > capacity_) {
    Release();
    data_ = allocator_->Allocate(bytes);
    capacity_ = bytes;
  }
}

void Tensor::SetZero() {
  COHORT_CHECK(device().kind == Device::Kind::kCpu, "SetZero on %s", device().ToString().c_str());
  if (data_ != nullptr) std::memset(data_, 0, nbytes());
}

void Tensor::CopyFrom(const Tensor& src) {
  COHORT_CHECK(src.dtype_ == dtype_, "copy %s into %s", std::string(DTypeName(src.dtype_)).c_str(),
               std::string(DTypeName(dtype_)).c_str());
  COHORT_CHECK(src.device().kind == Device::Kind::kCpu && device().kind == Device::Kind::kCpu,
               "host copy between %s and %s", src.device().ToString().c_str(),
               device().ToString().c_str());
  Resize(src.shape_);
  if (nbytes() > 0) std::memcpy(data_, src.data_, nbytes());
}

namespace {

template <typename To, typename From>
void ConvertElements(const Tensor& src, Tensor* dst) {
  const From* s = src.data<From>();
  To* d = dst->data<To>();
  for (int64_t i = 0; i < src.numel(); ++i) d[i] = static_cast<To>(s[i]);
}

}  // namespace

void CopyRows(const Tensor& src, int64_t first, int64_t n, Tensor* dst) {
  COHORT_CHECK(src.device().kind == Device::Kind::kCpu, "CopyRows from %s",
               src.device().ToString().c_str());
  COHORT_CHECK(first >= 0 && n >= 0 && first + n <= src.shape()[0], "rows [%ld, %ld) of %s",
               first, first + n, src.shape().ToString().c_str());
  std::vector<int64_t> dims = src.shape().dims();
  const size_t row_bytes = dims[0] == 0 ? 0 : src.nbytes() / dims[0];
  dims[0] = n;
  if (dst->dtype() != src.dtype()) *dst = Tensor(Shape{0}, src.dtype());
  dst->Resize(Shape(std::move(dims)));
  if (n > 0) {
    std::memcpy(dst->raw(), static_cast<const char*>(src.raw()) + first * row_bytes,
                n * row_bytes);
  }
}

Tensor ConvertTo(const Tensor& src, DType dtype) {
  Tensor dst(src.shape(), dtype);
  if (src.dtype() == dtype) {
    dst.CopyFrom(src);
  } else if (src.dtype() == DType::kF32 && dtype == DType::kF64) {
    ConvertElements<double, float>(src, &dst);
  } else if (src.dtype() == DType::kF64 && dtype == DType::kF32) {
    ConvertElements<float, double>(src, &dst);
  } else {
    COHORT_CHECK(false, "no conversion from %s to %s", std::string(DTypeName(src.dtype())).c_str(),
                 std::string(DTypeName(dtype)).c_str());
  }
  return dst;
}

}  // namespace cohort
