// The trainer on a GPU (--devices gpu:0): the same training loop, kvstore and export as on the
// CPU, with the parameters moved through the GPU backend's exchange.

#include <cmath>
#include <sstream>

#include "gtest/gtest.h"
#include "trainer/io/safetensors.h"
#include "trainer/loop/training.h"

namespace cohort {
namespace {

TrainOptions SmallRun(const std::string& devices, const std::string& precision,
                      const std::string& output) {
  TrainOptions o;
  o.model = "lenet";
  o.dataset = "synthetic:1x28x28:10";
  o.batch_size = 256;
  o.epochs = 1;
  o.lr = 0.02;
  o.lr_schedule = "constant";
  o.devices = devices;
  o.precision = precision;
  o.output = output;
  o.log_interval = 1000;
  return o;
}

absl::StatusOr<SafetensorsFile> TrainAndRead(const TrainOptions& o) {
  std::ostringstream log;
  auto result = Train(o, CreateKVStore, log, nullptr);
  if (!result.ok()) return result.status();
  return ReadSafetensors(o.output);
}

// ‖a − b‖ / ‖b‖ over every tensor of two files with the same names.
double RelativeDifference(const SafetensorsFile& a, const SafetensorsFile& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.tensors.size(); ++i) {
    EXPECT_EQ(a.names[i], b.names[i]);
    const Tensor x = ConvertTo(a.tensors[i], DType::kF64);
    const Tensor y = ConvertTo(b.tensors[i], DType::kF64);
    for (int64_t j = 0; j < y.numel(); ++j) {
      const double d = x.data<double>()[j] - y.data<double>()[j];
      diff += d * d;
      norm += y.data<double>()[j] * y.data<double>()[j];
    }
  }
  return std::sqrt(diff / norm);
}

// An epoch in fp32 on the GPU ends where the CPU's ends, up to rounding; bf16 ends nearby, and
// both export plain F32 tensors under the same names.
TEST(GpuTrainingTest, MatchesTheCpuTrainer) {
  const std::string dir = ::testing::TempDir();
  auto gpu32 = TrainAndRead(SmallRun("gpu:0", "fp32", dir + "/gpu_fp32.safetensors"));
  if (gpu32.status().code() == absl::StatusCode::kUnavailable) {
    GTEST_SKIP() << "needs a GPU: " << gpu32.status();
  }
  ASSERT_TRUE(gpu32.ok()) << gpu32.status();
  auto cpu = TrainAndRead(SmallRun("cpu", "fp32", dir + "/cpu.safetensors"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto gpu16 = TrainAndRead(SmallRun("gpu:0", "bf16", dir + "/gpu_bf16.safetensors"));
  ASSERT_TRUE(gpu16.ok()) << gpu16.status();
  ASSERT_EQ(gpu32->names, cpu->names);
  ASSERT_EQ(gpu16->names, cpu->names);
  for (const Tensor& t : gpu16->tensors) EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_LT(RelativeDifference(*gpu32, *cpu), 1e-3);
  EXPECT_LT(RelativeDifference(*gpu16, *cpu), 5e-2);
}

}  // namespace
}  // namespace cohort
