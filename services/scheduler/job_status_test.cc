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

TEST(JobStatusTest, TheEtaIsTheSlowestAliveWorkersRestAndTheAccuracyTheLatest) {
  JobStatus status;
  status.state = JobState::kRunning;
  WorkerProgress lead;
  lead.step = 100;
  lead.total_steps = 400;
  lead.step_seconds = 0.05;  // 300 steps left: 15 s
  lead.loss = 0.5;
  lead.test_top1 = 91.5;
  WorkerProgress slow = lead;
  slow.step = 98;
  slow.step_seconds = 0.1;  // 302 steps left: 30.2 s
  slow.loss = 0.7;
  slow.test_top1.reset();
  WorkerProgress dead = slow;
  dead.step_seconds = 10;  // a dead worker's pace does not count
  status.members = {{MemberRole::kWorker, 0, MemberState::kAlive, "h1", 1, "", 0.1, "", lead},
                    {MemberRole::kWorker, 1, MemberState::kAlive, "h2", 2, "", 0.1, "", slow},
                    {MemberRole::kWorker, 2, MemberState::kDead, "h3", 3, "", 9, "x", dead}};
  const JobProgress p = SummarizeProgress(status);
  EXPECT_EQ(p.step, 100);
  EXPECT_EQ(p.total_steps, 400);
  EXPECT_EQ(p.reporting, 2);
  EXPECT_DOUBLE_EQ(p.loss, 0.6);
  ASSERT_TRUE(p.eta_seconds.has_value());
  EXPECT_NEAR(*p.eta_seconds, 30.2, 1e-9);
  EXPECT_EQ(p.test_top1, 91.5);
  const nlohmann::json j = nlohmann::json::parse(JobStatusJson(status));
  EXPECT_NEAR(j["eta_seconds"].get<double>(), 30.2, 1e-9);
  EXPECT_EQ(j["total_steps"], 400);
  EXPECT_EQ(j["members"][0]["progress"]["test_top1"], 91.5);
  EXPECT_FALSE(j["members"][1]["progress"].contains("test_top1"));
  // Before any worker reports how long the run is, the ETA is unknown: null, not 0.
  status.members.resize(0);
  EXPECT_TRUE(nlohmann::json::parse(JobStatusJson(status))["eta_seconds"].is_null());
}

}  // namespace
}  // namespace cohort
