#include "trainer/loop/benchmark.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(BenchmarkTest, TimesStepsAndSplitsOverhead) {
  BenchmarkCase c{"resnet20", Shape{3, 16, 16}, 10, 8, 1, 2};
  auto r = RunTrainingBenchmark(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->images_per_second, 0);
  EXPECT_NEAR(r->images_per_second, 8 * 1000.0 / r->step_ms, 1e-6 * r->images_per_second);
  // Most of a ResNet step is primitives; some of it is not.
  EXPECT_GT(r->framework_overhead, 0.0);
  EXPECT_LT(r->framework_overhead, 1.0);
  EXPECT_GE(r->peak_bytes, 8 * 3 * 16 * 16 * 4);  // at least the batch's images
}

TEST(BenchmarkTest, UnknownModelIsAnError) {
  EXPECT_FALSE(RunTrainingBenchmark({"resnet7", Shape{3, 8, 8}}).ok());
}

}  // namespace
}  // namespace cohort
