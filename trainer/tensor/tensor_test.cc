#include "trainer/tensor/tensor.h"

#include <cstdint>

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

TEST(DTypeTest, Names) {
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
}

}  // namespace
}  // namespace cohort
