#include "trainer/devices.h"

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
  auto gpu = MakeDeviceBackends("gpu:0,1");
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace cohort
