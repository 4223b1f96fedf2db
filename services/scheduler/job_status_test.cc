// The /status document: the job's fields, every member, and images/sec summed over the alive
// workers only.

#include "services/scheduler/job_status.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(JobStatusTest, SaysTheJobEveryMemberAndTheAliveWorkersSpeed) {
  JobStatus status;
  status.job_id = "job-1";
  status.state = JobState::kRunning;
  status.mode = KVStoreMode::kDistAsync;
  status.generation = 2;
  status.workers = {0, 1};
  status.num_shards = 1;
  WorkerProgress fast;
  fast.step = 40;
  fast.images_per_second = 300;
  status.members = {{MemberRole::kShard, 0, MemberState::kAlive, "h0", 11, "h0:5000", 0.1, "", {}},
                    {MemberRole::kWorker, 0, MemberState::kAlive, "h1", 12, "", 0.2, "", fast},
                    {MemberRole::kWorker, 1, MemberState::kDead, "h2", 13, "", 9, "oom", fast}};
  status.straggler = Straggler{1, "h2", 0.5, 0, 0.25, 3};
  const nlohmann::json j = nlohmann::json::parse(JobStatusJson(status));
  EXPECT_EQ(j["job_id"], "job-1");
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["mode"], "dist_async");
  EXPECT_EQ(j["generation"], 2);
  EXPECT_EQ(j["num_workers"], 2);
  EXPECT_EQ(j["images_per_second"], 300);  // the dead worker's last figure does not count
  ASSERT_EQ(j["members"].size(), 3u);
  EXPECT_EQ(j["members"][0]["role"], "shard");
  EXPECT_EQ(j["members"][0]["address"], "h0:5000");
  EXPECT_FALSE(j["members"][0].contains("progress"));
  EXPECT_EQ(j["members"][2]["state"], "dead");
  EXPECT_EQ(j["members"][2]["last_error"], "oom");
  EXPECT_EQ(j["members"][1]["progress"]["step"], 40);
  EXPECT_EQ(j["straggler"]["lag_steps"], 3);
}

}  // namespace
}  // namespace cohort
