#include "services/scheduler/job_history.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace cohort {
namespace {

MemberStatus Worker(int rank, MemberState state, int64_t pid, double images_per_second = 0,
                    std::string error = "") {
  MemberStatus m;
  m.role = MemberRole::kWorker;
  m.rank = rank;
  m.state = state;
  m.host = "h" + std::to_string(rank);
  m.pid = pid;
  m.last_error = std::move(error);
  if (images_per_second > 0) {
    WorkerProgress p;
    p.step = 10;
    p.total_steps = 100;
    p.step_seconds = 0.1;
    p.images_per_second = images_per_second;
    p.loss = 1.0;
    m.progress = p;
  }
  return m;
}

TEST(JobHistoryTest, SamplesTheJobsProgressAndListsWhatHappened) {
  JobHistory history;
  JobStatus s;
  s.state = JobState::kForming;
  s.members = {Worker(0, MemberState::kMissing, 0), Worker(1, MemberState::kMissing, 0)};
  history.Record(s);
  s.seconds_since_start = 1;
  s.state = JobState::kRunning;
  s.members = {Worker(0, MemberState::kAlive, 10, 100), Worker(1, MemberState::kAlive, 11, 50)};
  history.Record(s);
  s.seconds_since_start = 2;
  s.members[1] = Worker(1, MemberState::kDead, 11, 50, "out of memory");
  s.generation = 1;
  s.workers = {0};
  history.Record(s);
  s.seconds_since_start = 3;
  s.members[1] = Worker(1, MemberState::kAlive, 12, 60);
  history.Record(s);
  s.seconds_since_start = 4;
  s.state = JobState::kDone;
  s.reason = "all 2 workers finished";
  s.members = {Worker(0, MemberState::kStopped, 10, 100), Worker(1, MemberState::kStopped, 12, 60)};
  history.Record(s);

  const nlohmann::json j = nlohmann::json::parse(history.Json());
  std::vector<std::string> events;
  for (const auto& e : j["events"]) events.push_back(e["text"]);
  EXPECT_EQ(events, (std::vector<std::string>{
                        "job FORMING",
                        "job RUNNING",
                        "worker 0 (host h0) joined",
                        "worker 1 (host h1) joined",
                        "generation 1: 1 worker",
                        "worker 1 (host h1) died: out of memory",
                        "worker 1 (host h1) came back as pid 12",
                        "job DONE: all 2 workers finished",
                        "worker 0 (host h0) finished",
                        "worker 1 (host h1) finished",
                    }));
  // No sample before the job ran nor after it ended (no worker reports then); one a snapshot
  // while it runs, the alive workers summed.
  ASSERT_EQ(j["samples"].size(), 3u);
  EXPECT_EQ(j["samples"][0]["t"], 1);
  EXPECT_EQ(j["samples"][0]["images_per_second"], 150);
  EXPECT_EQ(j["samples"][0]["workers"], 2);
  EXPECT_EQ(j["samples"][1]["images_per_second"], 100);  // the dead worker does not count
  EXPECT_EQ(j["samples"][1]["loss"], 1.0);
}

TEST(JobHistoryTest, StaysBoundedByThinningSamplesAndDroppingOldEvents) {
  JobHistory history(/*max_samples=*/10, /*max_events=*/3);
  JobStatus s;
  s.state = JobState::kRunning;
  for (int t = 0; t < 1000; ++t) {
    s.seconds_since_start = t;
    s.members = {Worker(0, MemberState::kAlive, 100 + t, 10)};  // a new pid each time: an event
    history.Record(s);
  }
  const nlohmann::json j = nlohmann::json::parse(history.Json());
  EXPECT_LE(j["samples"].size(), 10u);
  EXPECT_GE(j["samples"].size(), 5u);
  EXPECT_EQ(j["samples"][0]["t"], 0);  // still from the start
  EXPECT_GE(j["samples"].back()["t"].get<double>(), 800);  // and nearly up to now
  EXPECT_EQ(j["events"].size(), 3u);
  EXPECT_EQ(j["events_dropped"], 1000 + 1 - 3);
}

}  // namespace
}  // namespace cohort
