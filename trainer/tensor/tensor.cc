#include "trainer/tensor/tensor.h"

#include <atomic>
#include <cmath>
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

// Each buffer is preceded by a header (one alignment unit) holding its size, so that Free
// knows what it gives back.
class AlignedCpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlign = 64;

  Device device() const override { return Device::Cpu(); }
  void* Allocate(size_t bytes) override {
    const size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    auto* p = static_cast<char*>(std::aligned_alloc(kAlign, kAlign + size));
    COHORT_CHECK(p != nullptr, "out of host memory allocating %zu bytes", bytes);
    *reinterpret_cast<size_t*>(p) = size;
    const int64_t now = in_use_.fetch_add(size) + static_cast<int64_t>(size);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p + kAlign;
  }
  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    char* p = static_cast<char*>(ptr) - kAlign;
    in_use_.fetch_sub(static_cast<int64_t>(*reinterpret_cast<size_t*>(p)));
    std::free(p);
  }
  MemoryUse memory_use() const override { return {in_use_.load(), peak_.load()}; }
  void ResetPeak() override { peak_.store(in_use_.load()); }

 private:
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace

void Allocator::Copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void Allocator::Zero(void* ptr, size_t bytes) { std::memset(ptr, 0, bytes); }

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

Tensor Tensor::Borrow(void* data, Shape shape, DType dtype, Allocator* allocator) {
  Tensor view;
  view.shape_ = std::move(shape);
  view.dtype_ = dtype;
  view.allocator_ = allocator;
  view.data_ = data;
  view.capacity_ = view.nbytes();
  view.owned_ = false;
  return view;
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
    owned_ = other.owned_;
    other.shape_ = Shape();
    other.data_ = nullptr;
    other.capacity_ = 0;
    other.owned_ = true;
  }
  return *this;
}

void Tensor::Release() {
  if (data_ != nullptr && owned_) allocator_->Free(data_);
  data_ = nullptr;
  capacity_ = 0;
  owned_ = true;
}

void Tensor::Resize(const Shape& shape) {
  for (int64_t d : shape.dims()) COHORT_CHECK(d >= 0, "negative dimension in %s", shape.ToString().c_str());
  shape_ = shape;
  const size_t bytes = nbytes();
  if (bytes > capacity_) {
    COHORT_CHECK(owned_, "a borrowed tensor cannot grow to %s", shape.ToString().c_str());
    Release();
    data_ = allocator_->Allocate(bytes);
    capacity_ = bytes;
  }
}

void Tensor::SetZero() {
  if (data_ != nullptr) allocator_->Zero(data_, nbytes());
}

void Tensor::CopyFrom(const Tensor& src) {
  COHORT_CHECK(src.dtype_ == dtype_, "copy %s into %s", std::string(DTypeName(src.dtype_)).c_str(),
               std::string(DTypeName(dtype_)).c_str());
  Resize(src.shape_);
  if (nbytes() == 0) return;
  // A device's allocator knows how to reach both its own memory and the host's.
  Allocator* via = src.device().kind != Device::Kind::kCpu ? src.allocator_ : allocator_;
  via->Copy(data_, src.data_, nbytes());
}

Tensor ToHost(const Tensor& t, DType dtype) {
  if (t.device().kind == Device::Kind::kCpu) return ConvertTo(t, dtype);
  Tensor host(Shape{0}, t.dtype());
  host.CopyFrom(t);
  return t.dtype() == dtype ? std::move(host) : ConvertTo(host, dtype);
}

uint16_t FloatToBf16(float v) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float Bf16ToFloat(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &x, 4);
  return v;
}

uint16_t FloatToF16(float v) {
  uint32_t x;
  std::memcpy(&x, &v, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: infinity
  uint32_t half, rem, mid;
  if (e <= 0) {  // a subnormal half (or zero): the implicit bit joins the shifted mantissa
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    half = mant >> shift;
    rem = mant & ((1u << shift) - 1);
    mid = 1u << (shift - 1);
  } else {
    half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    rem = mant & 0x1fffu;
    mid = 0x1000u;
  }
  // Round to nearest even; a carry into the exponent is the right result (up to infinity).
  if (rem > mid || (rem == mid && (half & 1u) != 0)) ++half;
  return static_cast<uint16_t>(sign | half);
}

float F16ToFloat(uint16_t bits) {
  const float sign = (bits & 0x8000u) != 0 ? -1.0f : 1.0f;
  const int exp = (bits >> 10) & 0x1f;
  const int mant = bits & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -24);
  if (exp == 31) return mant != 0 ? std::nanf("") : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
}

namespace {

double GetAsDouble(const Tensor& t, int64_t i) {
  const void* p = t.raw();
  switch (t.dtype()) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF64: return static_cast<const double*>(p)[i];
    case DType::kBF16: return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return F16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
  }
  return 0;
}

void SetFromDouble(Tensor* t, int64_t i, double v) {
  void* p = t->raw();
  switch (t->dtype()) {
    case DType::kF32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = FloatToBf16(static_cast<float>(v)); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = FloatToF16(static_cast<float>(v)); break;
    case DType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
  }
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
  COHORT_CHECK(src.device().kind == Device::Kind::kCpu, "ConvertTo on %s",
               src.device().ToString().c_str());
  COHORT_CHECK(src.dtype() == dtype || (src.dtype() != DType::kI32 && dtype != DType::kI32),
               "no conversion from %s to %s", std::string(DTypeName(src.dtype())).c_str(),
               std::string(DTypeName(dtype)).c_str());
  Tensor dst(src.shape(), dtype);
  if (src.dtype() == dtype) {
    dst.CopyFrom(src);
  } else {
    for (int64_t i = 0; i < src.numel(); ++i) SetFromDouble(&dst, i, GetAsDouble(src, i));
  }
  return dst;
}

}  // namespace cohort
