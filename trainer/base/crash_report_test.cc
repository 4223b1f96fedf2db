#include "trainer/base/crash_report.h"

#include <csignal>
#include <cstdlib>

#include "gtest/gtest.h"

namespace cohort {
namespace {

int* volatile nowhere = nullptr;  // volatile: the compiler cannot see the write fail

// Not inlined, so that the report names it.
__attribute__((noinline)) void CrashInCohortCode() {
  *nowhere = 1;
  asm volatile("");  // no tail call: this frame stays on the stack
}

TEST(CrashReportTest, ACrashSaysTheSignalAndTheFunctionAndDiesOfIt) {
  EXPECT_EXIT(
      {
        ReportCrashes("/proc/self/exe");
        CrashInCohortCode();
      },
      testing::KilledBySignal(SIGSEGV), "SIGSEGV(.|\n)*CrashInCohortCode");
}

TEST(CrashReportTest, AnAbortIsReportedToo) {
  EXPECT_EXIT(
      {
        ReportCrashes("/proc/self/exe");
        std::abort();
      },
      testing::KilledBySignal(SIGABRT), "SIGABRT(.|\n)*AnAbortIsReportedToo");
}

TEST(CrashReportTest, AStopIsNoCrash) {
  EXPECT_EXIT(
      {
        ReportCrashes("/proc/self/exe");
        std::raise(SIGTERM);
      },
      testing::KilledBySignal(SIGTERM), "^[^*]*$");  // no "*** ... received" report
}

}  // namespace
}  // namespace cohort
