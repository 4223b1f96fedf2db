#include "trainer/eval/accuracy.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(AccuracyTest, TopOneAndTopFiveWithTies) {
  // 3 samples, 7 classes.
  Tensor logits(Shape{3, 7});
  Tensor labels(Shape{3}, DType::kI32);
  const float rows[3][7] = {
      {0.1f, 0.9f, 0.2f, 0.3f, 0.0f, 0.0f, 0.0f},  // label 1: top-1
      {5, 4, 3, 2, 1, 0, -1},                       // label 4: rank 5 → top-5 only
      {1, 1, 1, 1, 1, 1, 1},                        // label 5: ties, 5 lower indices rank first
  };
  std::copy(&rows[0][0], &rows[0][0] + 21, logits.data<float>());
  labels.data<int32_t>()[0] = 1;
  labels.data<int32_t>()[1] = 4;
  labels.data<int32_t>()[2] = 5;
  Accuracy acc;
  CountTopK(logits, labels, &acc);
  EXPECT_EQ(acc.count, 3);
  EXPECT_EQ(acc.top1, 1);
  EXPECT_EQ(acc.top5, 2);
  labels.data<int32_t>()[2] = 4;  // tied with 4 lower indices: inside top-5
  CountTopK(logits, labels, &acc);
  EXPECT_EQ(acc.count, 6);
  EXPECT_EQ(acc.top5, 5);
  EXPECT_NEAR(acc.top1_percent(), 100.0 * 2 / 6, 1e-12);
}

}  // namespace
}  // namespace cohort
