#include "trainer/tensor/tensor.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ShapeTest, NumelAndString) {
  Shape s{64, 1, 28, 28};
  EXPECT_EQ(s.rank(), 4);
  EXPECT_EQ(s.numel(), 64 * 28 * 28);
  EXPECT_EQ(s.ToString(), "(64, 1, 28, 28)");
  EXPECT_EQ(Shape{}.numel(), 1);  // a scalar
  EXPECT_EQ((Shape{3, 0}).numel(), 0);
}

TEST(TensorTest, AlignedAndTyped) {
  Tensor t(Shape{3, 5}, DType::kF32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(t.device().ToString(), "cpu");
  t.SetZero();
  for (float v : t.span<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_DEATH(t.data<double>(), "holds F32");
}

TEST(TensorTest, ResizeReusesBufferWhenItFits) {
  Tensor t(Shape{128, 10});
  void* first = t.raw();
  t.Resize(Shape{64, 10});
  EXPECT_EQ(t.raw(), first);
  t.Resize(Shape{128, 10});
  EXPECT_EQ(t.raw(), first);
  t.Resize(Shape{256, 10});
  EXPECT_EQ(t.numel(), 2560);
}

TEST(TensorTest, MoveAndCopy) {
  Tensor a(Shape{4}, DType::kF64);
  for (int i = 0; i < 4; ++i) a.data<double>()[i] = i * 0.5;
  Tensor b = std::move(a);
  EXPECT_EQ(a.numel(), 1);  // moved-from: empty shape, no buffer
  EXPECT_EQ(a.raw(), nullptr);
  Tensor c(Shape{1}, DType::kF64);
  c.CopyFrom(b);
  EXPECT_EQ(c.shape(), b.shape());
  EXPECT_EQ(c.data<double>()[3], 1.5);
  Tensor f = ConvertTo(c, DType::kF32);
  EXPECT_EQ(f.dtype(), DType::kF32);
  EXPECT_EQ(f.data<float>()[1], 0.5f);
}

TEST(TensorTest, ABorrowedViewReadsAndWritesTheOwnersMemoryAndNeverFreesIt) {
  std::vector<float> owner = {1, 2, 3, 4, 5, 6};
  {
    Tensor view = Tensor::Borrow(owner.data(), Shape({2, 3}), DType::kF32);
    EXPECT_EQ(view.raw(), owner.data());
    EXPECT_EQ(view.data<float>()[4], 5);
    view.data<float>()[0] = 10;
    view.Resize(Shape({3, 2}));  // fits: the same memory
    EXPECT_EQ(view.raw(), owner.data());
    Tensor moved = std::move(view);
    moved.SetZero();
  }  // the views end; the vector still owns its memory
  EXPECT_EQ(owner, std::vector<float>(6, 0));
  Tensor copy;
  copy.CopyFrom(Tensor::Borrow(owner.data(), Shape({6}), DType::kF32));
  EXPECT_NE(copy.raw(), owner.data());
}

TEST(TensorTest, CopyRowsTakesALeadingSliceWithItsDtype) {
  Tensor src(Shape{4, 2, 3}, DType::kI32);
  for (int i = 0; i < 24; ++i) src.data<int32_t>()[i] = i;
  Tensor dst;  // F32 until it takes src's dtype
  CopyRows(src, 1, 2, &dst);
  EXPECT_EQ(dst.dtype(), DType::kI32);
  EXPECT_EQ(dst.shape(), (Shape{2, 2, 3}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(dst.data<int32_t>()[i], 6 + i);
  CopyRows(src, 3, 1, &dst);
  EXPECT_EQ(dst.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(dst.data<int32_t>()[0], 18);
}

// Round to nearest even, ties to even, subnormals, overflow and NaN, against known bit patterns.
TEST(DTypeTest, SixteenBitFloatsRoundToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.00390625f), 0x3f80);  // halfway between 1 and the next: ties to even
  EXPECT_EQ(FloatToBf16(1.01171875f), 0x3f82);  // halfway above an odd mantissa: rounds up
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);

  EXPECT_EQ(FloatToF16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7bff);    // the largest half
  EXPECT_EQ(FloatToF16(65536.0f), 0x7c00);    // overflows to infinity
  EXPECT_EQ(FloatToF16(1.0f + 0x1p-11f), 0x3c00);  // tie to even
  EXPECT_EQ(FloatToF16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(FloatToF16(0x1p-24f), 0x0001);    // the smallest subnormal
  EXPECT_EQ(FloatToF16(0x1p-26f), 0x0000);    // below half of it
  EXPECT_EQ(FloatToF16(-0x1p-14f), 0x8400);   // the smallest normal, negative
  EXPECT_EQ(F16ToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(F16ToFloat(0xc500), -5.0f);
  EXPECT_TRUE(std::isinf(F16ToFloat(0xfc00)));
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(std::nanf("")))));
  // Every finite half survives the trip through float.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(FloatToF16(F16ToFloat(static_cast<uint16_t>(b))), b) << b;
  }
}

TEST(TensorTest, ConvertsThroughSixteenBitTypes) {
  Tensor a(Shape{3}, DType::kF64);
  a.data<double>()[0] = 0.1;
  a.data<double>()[1] = -3.0;
  a.data<double>()[2] = 1000.5;
  Tensor b = ConvertTo(ConvertTo(a, DType::kBF16), DType::kF64);
  Tensor h = ConvertTo(ConvertTo(a, DType::kF16), DType::kF32);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(b.data<double>()[i], a.data<double>()[i], std::abs(a.data<double>()[i]) / 256);
    EXPECT_NEAR(h.data<float>()[i], a.data<double>()[i], std::abs(a.data<double>()[i]) / 2048);
  }
}

// Copies and zeroing go through the allocator of the tensor on a device.
class CountingAllocator final : public Allocator {
 public:
  Device device() const override { return Device::Cuda(0); }
  void* Allocate(size_t bytes) override { return CpuAllocator()->Allocate(bytes); }
  void Free(void* ptr) override { CpuAllocator()->Free(ptr); }
  void Copy(void* dst, const void* src, size_t bytes) override {
    ++copies;
    Allocator::Copy(dst, src, bytes);
  }
  void Zero(void* ptr, size_t bytes) override {
    ++zeros;
    Allocator::Zero(ptr, bytes);
  }
  int copies = 0, zeros = 0;
};

TEST(TensorTest, DeviceCopiesGoThroughTheDeviceAllocator) {
  CountingAllocator device;
  Tensor host(Shape{4});
  for (int i = 0; i < 4; ++i) host.data<float>()[i] = i + 0.5f;
  Tensor on_device(Shape{0}, DType::kF32, &device);
  on_device.CopyFrom(host);
  Tensor back;
  back.CopyFrom(on_device);
  EXPECT_EQ(device.copies, 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back.data<float>()[i], i + 0.5f);
  const Tensor as_double = ToHost(on_device, DType::kF64);
  EXPECT_EQ(device.copies, 3);
  EXPECT_EQ(as_double.device().kind, Device::Kind::kCpu);
  EXPECT_EQ(as_double.data<double>()[3], 3.5);
  on_device.SetZero();
  EXPECT_EQ(device.zeros, 1);
  back.CopyFrom(on_device);
  EXPECT_EQ(back.data<float>()[2], 0.0f);
}

TEST(DTypeTest, Names) {
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
}

}  // namespace
}  // namespace cohort
