#include "tools/launch/metrics_targets.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

TEST(FileSdTargetsTest, OneLabelledGroupPerTarget) {
  const nlohmann::json list = nlohmann::json::parse(FileSdTargets(
      {{"127.0.0.1:9100", "job-7", Role::kScheduler, 0}, {"127.0.0.1:9102", "job-7", Role::kWorker, 1}}));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["targets"], nlohmann::json::array({"127.0.0.1:9100"}));
  EXPECT_EQ(list[0]["labels"], nlohmann::json({{"job", "job-7"}, {"role", "scheduler"}, {"rank", "0"}}));
  EXPECT_EQ(list[1]["labels"]["role"], "worker");
  EXPECT_EQ(list[1]["labels"]["rank"], "1");  // file_sd labels are strings
}

}  // namespace
}  // namespace cohort::launch
