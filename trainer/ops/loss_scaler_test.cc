#include "trainer/ops/loss_scaler.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(LossScalerTest, HalvesOnOverflowAndGrowsAfterCleanSteps) {
  LossScaler s({true, 1024.0f, 3});
  EXPECT_EQ(s.scale(), 1024.0f);
  s.Update(true);
  EXPECT_EQ(s.scale(), 512.0f);
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale(), 512.0f);
  s.Update(true);  // an overflow restarts the count
  EXPECT_EQ(s.scale(), 256.0f);
  for (int i = 0; i < 3; ++i) s.Update(false);
  EXPECT_EQ(s.scale(), 512.0f);
}

TEST(LossScalerTest, DisabledStaysAtOne) {
  LossScaler s({});
  EXPECT_FALSE(s.enabled());
  s.Update(true);
  for (int i = 0; i < 5000; ++i) s.Update(false);
  EXPECT_EQ(s.scale(), 1.0f);
}

}  // namespace
}  // namespace cohort
