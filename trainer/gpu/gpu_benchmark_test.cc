#include "trainer/gpu/gpu_benchmark.h"

#include "gtest/gtest.h"

namespace cohort::cuda {
namespace {

// A short run of every precision reports a speed and the memory it holds.
TEST(GpuBenchmarkTest, ReportsSpeedForEveryPrecision) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16, Precision::kFp16}) {
    GpuBenchmarkCase c;
    c.model = "resnet20";
    c.batch = 32;
    c.backend.precision = p;
    c.warmup_steps = 1;
    c.steps = 2;
    auto r = RunGpuBenchmark(c);
    if (!r.ok() && r.status().code() == absl::StatusCode::kUnavailable) {
      GTEST_SKIP() << "needs a GPU: " << r.status();
    }
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->images_per_second, 0) << PrecisionName(p);
    EXPECT_GT(r->memory_gib, 0) << PrecisionName(p);
    EXPECT_GT(r->peak_gib, 0) << PrecisionName(p);
    EXPECT_LE(r->peak_gib, r->memory_gib) << PrecisionName(p);
  }
}

TEST(GpuBenchmarkTest, UnknownModelIsAnError) {
  GpuBenchmarkCase c;
  c.model = "resnet7";
  auto r = RunGpuBenchmark(c);
  if (!r.ok() && r.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << "needs a GPU: " << r.status();
  }
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// Timed from a CUDA graph, LeNet trains as eagerly: its loss falls over the same steps.
TEST(GpuBenchmarkTest, AStepGraphTrainsAsTheEagerSteps) {
  GpuBenchmarkCase c;
  c.model = "lenet";
  c.batch = 64;
  c.backend.precision = Precision::kFp32;
  c.backend.deterministic = true;
  c.warmup_steps = 2;
  c.steps = 10;
  auto eager = RunGpuBenchmark(c);
  if (!eager.ok() && eager.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << "needs a GPU: " << eager.status();
  }
  ASSERT_TRUE(eager.ok()) << eager.status();
  c.cuda_graph = true;
  auto graphed = RunGpuBenchmark(c);
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  EXPECT_LT(graphed->last_loss, graphed->first_loss);
  EXPECT_EQ(graphed->first_loss, eager->first_loss);
  c.backend.precision = Precision::kFp16;
  EXPECT_EQ(RunGpuBenchmark(c).status().code(), absl::StatusCode::kInvalidArgument);
}

// Without a warm-up the timed steps would include cudnnFind's trials.
TEST(GpuBenchmarkTest, NoWarmUpIsAnError) {
  GpuBenchmarkCase c;
  c.warmup_steps = 0;
  EXPECT_EQ(RunGpuBenchmark(c).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::cuda
