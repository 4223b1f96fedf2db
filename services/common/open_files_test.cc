#include "services/common/open_files.h"

#include <sys/resource.h>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(OpenFilesTest, TheSoftLimitRisesToTheHardOne) {
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_max < 64) GTEST_SKIP() << "a hard limit of " << files.rlim_max << " open files";
  files.rlim_cur = 32;  // a low soft limit, as a stock one is for a large job
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &files), 0);
  const int64_t raised = RaiseOpenFileLimit();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, files.rlim_max);
  EXPECT_EQ(raised, static_cast<int64_t>(files.rlim_max));
}

}  // namespace
}  // namespace cohort
