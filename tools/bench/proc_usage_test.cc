#include "tools/bench/proc_usage.h"

#include <unistd.h>

#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(ProcUsageTest, ReadsThisProcesssCpuAndMemory) {
  const absl::Duration before = ProcessCpuTime(getpid());
  const absl::Time until = absl::Now() + absl::Milliseconds(100);
  volatile double spin = 0;
  while (absl::Now() < until) spin += 1;  // at least a clock tick of CPU
  EXPECT_GT(ProcessCpuTime(getpid()), before);
  const int64_t resident = ProcessResidentBytes(getpid());
  std::vector<char> touched(64 << 20, 1);  // 64 MiB made resident
  EXPECT_GT(ProcessResidentBytes(getpid()), resident + (32 << 20));
  EXPECT_EQ(ProcessCpuTime(-1), absl::ZeroDuration());
  EXPECT_EQ(ProcessResidentBytes(-1), 0);
}

}  // namespace
}  // namespace cohort
