#include "services/worker/worker_metrics.h"

#include <vector>

#include "gtest/gtest.h"
#include "services/common/metrics_testing.h"

namespace cohort {
namespace {

StepReport Report(int64_t step, double seconds) {
  StepReport r;
  r.step = step;
  r.epoch = 2;
  r.images = 32;
  r.lr = 0.05;
  r.step_seconds = seconds;
  r.data_seconds = 0.1 * seconds;
  r.step_result.loss = 1.5;
  r.step_result.forward_seconds = 0.3 * seconds;
  r.step_result.backward_seconds = 0.4 * seconds;
  r.step_result.push_seconds = 0.05 * seconds;
  r.step_result.pull_seconds = 0.15 * seconds;
  r.step_result.pushed_bytes = 1000;
  r.step_result.pulled_bytes = 900;
  r.total_steps = 500;
  r.memory_peak_bytes = 1000 * step;
  return r;
}

double Counter(ProcessMetrics& p, const std::string& name,
               const std::map<std::string, std::string>& labels = {}) {
  const auto series = FindSeries(p, name, labels);
  return series.has_value() ? series->counter.value : -1;
}

double Gauge(ProcessMetrics& p, const std::string& name) {
  const auto series = FindSeries(p, name);
  return series.has_value() ? series->gauge.value : -1;
}

TEST(WorkerMetricsTest, CountsImagesPhasesAndBytesOfEveryStep) {
  ProcessMetrics process("job-w", "worker", 1);
  WorkerMetrics metrics(process, nullptr);
  for (int s = 1; s <= 4; ++s) metrics.StepDone(Report(s, 0.5));
  EXPECT_EQ(Counter(process, "cohort_worker_images_total"), 128);
  EXPECT_EQ(Counter(process, "cohort_worker_steps_total"), 4);
  EXPECT_EQ(FindSeries(process, "cohort_worker_step_seconds")->histogram.sample_count, 4u);
  EXPECT_DOUBLE_EQ(FindSeries(process, "cohort_worker_step_seconds")->histogram.sample_sum, 2.0);
  const std::map<std::string, double> phases = {{"data", 0.2},      {"forward", 0.6},
                                                {"backward", 0.8},  {"push_wait", 0.1},
                                                {"pull_wait", 0.3}};
  double sum = 0;
  for (const auto& [phase, seconds] : phases) {
    EXPECT_NEAR(Counter(process, "cohort_worker_phase_seconds_total", {{"phase", phase}}), seconds,
                1e-12)
        << phase;
    sum += seconds;
  }
  EXPECT_NEAR(sum, 2.0, 1e-12);  // the phases make up the step
  EXPECT_EQ(Counter(process, "cohort_worker_pushed_bytes_total"), 4000);
  EXPECT_EQ(Counter(process, "cohort_worker_pulled_bytes_total"), 3600);
  EXPECT_EQ(Gauge(process, "cohort_worker_step"), 4);
  EXPECT_EQ(Gauge(process, "cohort_worker_epoch"), 2);
  EXPECT_DOUBLE_EQ(Gauge(process, "cohort_worker_learning_rate"), 0.05);
  EXPECT_GT(Gauge(process, "cohort_worker_last_step_timestamp_seconds"), 1.7e9);
  EXPECT_EQ(Gauge(process, "cohort_worker_memory_peak_bytes"), 4000);
  // Every series carries the process's labels.
  const auto images = FindSeries(process, "cohort_worker_images_total",
                                 {{"job", "job-w"}, {"role", "worker"}, {"rank", "1"}});
  EXPECT_TRUE(images.has_value());
}

TEST(WorkerMetricsTest, CountsTheSkippedSamplesAsTheLoopReportsThem) {
  ProcessMetrics process("job-w", "worker", 0);
  WorkerMetrics metrics(process, nullptr);
  for (const int64_t so_far : {0, 0, 2, 2, 5}) {
    StepReport r = Report(1, 0.1);
    r.skipped_samples = so_far;
    metrics.StepDone(r);
  }
  EXPECT_EQ(Counter(process, "cohort_worker_skipped_samples_total"), 5);
}

TEST(WorkerMetricsTest, ReportsProgressOncePerWindow) {
  ProcessMetrics process("job-w", "worker", 0);
  std::vector<v1::Progress> reports;
  WorkerMetrics metrics(process, [&](const v1::Progress& p) { reports.push_back(p); }, 1.0);
  for (int s = 1; s <= 3; ++s) metrics.StepDone(Report(s, 0.4));  // 1.2 s: one window
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].step(), 3);
  EXPECT_EQ(reports[0].epoch(), 2);
  EXPECT_NEAR(reports[0].images_per_second(), 96 / 1.2, 1e-9);
  EXPECT_NEAR(reports[0].step_seconds(), 0.4, 1e-12);
  EXPECT_NEAR(reports[0].communication_overhead(), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(reports[0].loss(), 1.5);
  EXPECT_NEAR(Gauge(process, "cohort_worker_communication_overhead_ratio"), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(Gauge(process, "cohort_worker_loss"), 1.5);
  EXPECT_EQ(reports[0].total_steps(), 500);
  EXPECT_FALSE(reports[0].has_test_top1());  // nothing evaluated yet
  metrics.StepDone(Report(4, 0.4));
  EXPECT_EQ(reports.size(), 1u);  // the next window has just begun
  // After an epoch's evaluation, every report carries its accuracy.
  metrics.EpochEvaluated(2, 88.5);
  EXPECT_DOUBLE_EQ(Gauge(process, "cohort_worker_test_top1_percent"), 88.5);
  for (int s = 5; s <= 7; ++s) metrics.StepDone(Report(s, 0.4));
  ASSERT_EQ(reports.size(), 2u);
  ASSERT_TRUE(reports[1].has_test_top1());
  EXPECT_DOUBLE_EQ(reports[1].test_top1(), 88.5);
}

}  // namespace
}  // namespace cohort
