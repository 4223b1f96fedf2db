#include "services/common/job_id.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(JobIdTest, NewIdsNameTheProcessAndDiffer) {
  const std::string a = NewJobId();
  EXPECT_TRUE(absl::StartsWith(a, absl::StrCat("job-", getpid(), "-"))) << a;
  EXPECT_EQ(a.size(), absl::StrCat("job-", getpid(), "-").size() + 8) << a;
  EXPECT_TRUE(IsValidJobId(a));
  EXPECT_NE(a, NewJobId());
}

TEST(JobIdTest, ValidIds) {
  EXPECT_TRUE(IsValidJobId("job-1.a_B"));
  EXPECT_FALSE(IsValidJobId(""));
  EXPECT_FALSE(IsValidJobId("a b"));
  EXPECT_FALSE(IsValidJobId("a/b"));
  EXPECT_FALSE(IsValidJobId("a\"b"));
}

}  // namespace
}  // namespace cohort
