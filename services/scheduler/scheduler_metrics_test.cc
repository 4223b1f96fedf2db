#include "services/scheduler/scheduler_metrics.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/common/metrics_testing.h"

namespace cohort {
namespace {

double Value(ProcessMetrics& p, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  const auto series = FindSeries(p, name, labels);
  if (!series.has_value()) return -1;
  return absl::EndsWith(name, "_total") ? series->counter.value : series->gauge.value;
}

TEST(SchedulerMetricsTest, ExportsTheSnapshot) {
  ProcessMetrics process("job-s", "scheduler", 0);
  JobSpec spec;
  spec.num_workers = 3;
  spec.num_shards = 2;
  SchedulerMetrics metrics(process, spec, 250.0);
  SchedulerSnapshot s;
  s.state = JobState::kRunning;
  s.members[static_cast<int>(MemberRole::kWorker)][static_cast<int>(MemberState::kAlive)] = 2;
  s.members[static_cast<int>(MemberRole::kWorker)][static_cast<int>(MemberState::kDead)] = 1;
  s.missed_heartbeats[static_cast<int>(MemberRole::kWorker)] = 5;
  s.barrier_waits = {absl::Milliseconds(300), absl::Seconds(2)};
  s.barrier_calls = 4;
  s.barrier_arrivals = 16;
  metrics.Update(s);
  EXPECT_EQ(Value(process, "cohort_scheduler_straggler_rank"), -1);
  s.straggler = Straggler{2, "host-2", 0.25, 0, 0.15, 3};
  s.missed_heartbeats[static_cast<int>(MemberRole::kWorker)] = 7;
  s.barrier_waits.clear();
  s.barrier_calls = 6;
  s.barrier_arrivals = 24;
  metrics.Update(s);

  EXPECT_EQ(Value(process, "cohort_scheduler_members", {{"member_role", "worker"}, {"state", "alive"}}), 2);
  EXPECT_EQ(Value(process, "cohort_scheduler_members", {{"member_role", "worker"}, {"state", "dead"}}), 1);
  EXPECT_EQ(Value(process, "cohort_scheduler_members", {{"member_role", "shard"}, {"state", "alive"}}), 0);
  EXPECT_EQ(Value(process, "cohort_scheduler_job_state", {{"state", "RUNNING"}}), 1);
  EXPECT_EQ(Value(process, "cohort_scheduler_job_state", {{"state", "FORMING"}}), 0);
  EXPECT_EQ(Value(process, "cohort_scheduler_missed_heartbeats_total", {{"member_role", "worker"}}), 7);
  EXPECT_EQ(Value(process, "cohort_scheduler_barrier_calls_total"), 6);
  EXPECT_EQ(Value(process, "cohort_scheduler_barrier_arrivals_total"), 24);
  EXPECT_EQ(Value(process, "cohort_scheduler_workers"), 3);
  EXPECT_EQ(Value(process, "cohort_scheduler_shards"), 2);
  EXPECT_EQ(Value(process, "cohort_scheduler_baseline_images_per_second"), 250);
  EXPECT_EQ(Value(process, "cohort_scheduler_straggler_rank"), 2);
  EXPECT_DOUBLE_EQ(Value(process, "cohort_scheduler_straggler_lag_seconds"), 0.15);
  EXPECT_EQ(Value(process, "cohort_scheduler_straggler_lag_steps"), 3);
  const auto barrier = FindSeries(process, "cohort_scheduler_barrier_wait_seconds");
  ASSERT_TRUE(barrier.has_value());
  EXPECT_EQ(barrier->histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(barrier->histogram.sample_sum, 2.3);
}

TEST(SchedulerMetricsTest, NoBaselineNoSeries) {
  ProcessMetrics process("job-s", "scheduler", 0);
  SchedulerMetrics metrics(process, JobSpec(), 0);
  EXPECT_FALSE(FindSeries(process, "cohort_scheduler_baseline_images_per_second").has_value());
}

}  // namespace
}  // namespace cohort
