#include "services/scheduler/job_page.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(JobPageTest, ServedPageIsTheHtmlFileAndWaitsForData) {
  std::ifstream file("services/scheduler/job_page.html");
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(JobPageHtml(), text.str());
  EXPECT_TRUE(absl::StrContains(JobPageHtml(), "const EMBEDDED = /*COHORT_DATA*/null;"));
}

TEST(JobPageTest, TheReportCarriesTheDataAndNoMemberTextCanCloseTheScript) {
  const std::string status =
      R"({"job_id":"job-7","state":"FAILED","reason":"</script><script>alert(1)</script>"})";
  const std::string history = R"({"samples":[{"t":1,"images_per_second":5}],"events":[]})";
  const std::string page = JobReportHtml(status, history);
  EXPECT_FALSE(absl::StrContains(page, "/*COHORT_DATA*/null"));
  EXPECT_TRUE(absl::StrContains(page, R"(const EMBEDDED = {"status":{"job_id":"job-7")"));
  EXPECT_TRUE(absl::StrContains(page, R"("history":{"samples":[{"t":1,"images_per_second":5}])"));
  EXPECT_TRUE(absl::StrContains(page, R"(\u003c/script>\u003cscript>alert(1))"));
  // The page's own script is the only one.
  size_t scripts = 0;
  for (size_t at = page.find("<script"); at != std::string::npos; at = page.find("<script", at + 1)) {
    ++scripts;
  }
  EXPECT_EQ(scripts, 1u);
}

}  // namespace
}  // namespace cohort
