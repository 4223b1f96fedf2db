#include "trainer/loop/devices.h"

#include <omp.h>

#include <algorithm>
#include <thread>

#include "gtest/gtest.h"

namespace cohort {
namespace {

int OpenMpThreadsAfterBinding(Backend* backend) {
  int threads = 0;
  std::thread t([&] {
    backend->BindCallingThread();
    threads = omp_get_max_threads();
  });
  t.join();
  return threads;
}

TEST(DevicesTest, CpuIsOneContextOnEveryCore) {
  for (const char* devices : {"cpu", "cpu:1"}) {
    auto backends = MakeDeviceBackends(devices);
    ASSERT_TRUE(backends.ok()) << devices << ": " << backends.status();
    ASSERT_EQ(backends->size(), 1u) << devices;
    EXPECT_EQ((*backends)[0]->name(), "onednn");
    EXPECT_EQ(OpenMpThreadsAfterBinding((*backends)[0].get()), omp_get_max_threads());
  }
}

TEST(DevicesTest, CpuNSharesTheCoresBetweenNContexts) {
  auto backends = MakeDeviceBackends("cpu:2");
  ASSERT_TRUE(backends.ok()) << backends.status();
  ASSERT_EQ(backends->size(), 2u);
  const int share = std::max(1, omp_get_max_threads() / 2);
  for (auto& b : *backends) EXPECT_EQ(OpenMpThreadsAfterBinding(b.get()), share);
}

TEST(DevicesTest, RefusesWhatItCannotRunNamingTheFlag) {
  for (const char* devices : {"cpu:0", "cpu:x", "cpu:-1", "cpu:65", "tpu", ""}) {
    auto backends = MakeDeviceBackends(devices);
    ASSERT_FALSE(backends.ok()) << devices;
    EXPECT_EQ(backends.status().code(), absl::StatusCode::kInvalidArgument) << devices;
    EXPECT_NE(backends.status().message().find("--devices="), std::string::npos);
  }
  // GPUs are named by distinct indices.
  for (const char* devices : {"gpu:x", "gpu:-1", "gpu:", "gpu:0,", "gpu:0,,1", "0,x", "gpu:1,1"}) {
    auto backends = MakeDeviceBackends(devices);
    EXPECT_EQ(backends.status().code(), absl::StatusCode::kInvalidArgument) << devices;
    EXPECT_NE(backends.status().message().find(std::string("--devices=") + devices),
              std::string::npos);
  }
  EXPECT_NE(MakeDeviceBackends("gpu:1,1").status().message().find("GPU 1 is named twice"),
            std::string::npos);
  // A build without the GPU backend says which binaries have it.
  for (const char* devices : {"gpu", "gpu:0", "gpu:0,1", "0,1"}) {
    auto gpu = MakeDeviceBackends(devices);
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented) << devices;
    EXPECT_NE(gpu.status().message().find("//trainer:train_gpu"), std::string::npos);
    EXPECT_NE(gpu.status().message().find("//services:worker_gpu"), std::string::npos);
  }
  // CPUs compute in fp32.
  auto bf16 = MakeDeviceBackends("cpu", {Precision::kBf16});
  EXPECT_EQ(bf16.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bf16.status().message().find("--precision=bf16 needs a GPU"), std::string::npos);
}

// A registered factory makes the GPU backends, with the index and options asked for.
TEST(DevicesTest, GpuBackendsComeFromTheRegisteredFactory) {
  int asked_index = -1;
  DeviceOptions asked;
  std::vector<int> asked_indices;
  RegisterGpuBackendFactory([&](int index, const DeviceOptions& options)
                                -> absl::StatusOr<std::unique_ptr<Backend>> {
    asked_index = index;
    asked_indices.push_back(index);
    asked = options;
    auto cpu = MakeDeviceBackends("cpu");
    if (!cpu.ok()) return cpu.status();
    return std::move((*cpu)[0]);
  });
  auto backends = MakeDeviceBackends("gpu:3", {Precision::kBf16, /*deterministic=*/true});
  ASSERT_TRUE(backends.ok()) << backends.status();
  EXPECT_EQ(backends->size(), 1u);
  EXPECT_EQ(asked_index, 3);
  EXPECT_EQ(asked.precision, Precision::kBf16);
  EXPECT_TRUE(asked.deterministic);
  EXPECT_EQ(asked_indices, std::vector<int>({3}));
  // Several GPUs: one backend each, in the order named (--gpus gives a bare list).
  for (const char* devices : {"gpu:2,0,1", "2,0,1"}) {
    asked_indices.clear();
    auto several = MakeDeviceBackends(devices, {Precision::kFp32});
    ASSERT_TRUE(several.ok()) << devices << ": " << several.status();
    EXPECT_EQ(several->size(), 3u) << devices;
    EXPECT_EQ(asked_indices, std::vector<int>({2, 0, 1})) << devices;
  }
  RegisterGpuBackendFactory(nullptr);
  EXPECT_EQ(MakeDeviceBackends("gpu:0").status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace cohort
