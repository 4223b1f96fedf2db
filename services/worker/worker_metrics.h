#ifndef COHORT_SERVICES_WORKER_WORKER_METRICS_H_
#define COHORT_SERVICES_WORKER_WORKER_METRICS_H_

#include <array>
#include <functional>
#include <optional>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "proto/scheduler.pb.h"
#include "services/common/metrics.h"
#include "trainer/loop/training_observer.h"

namespace cohort {

// A worker's metrics, fed by its training loop:
//   cohort_worker_images_total, cohort_worker_steps_total, cohort_worker_step_seconds
//   (histogram), cohort_worker_phase_seconds_total{phase=data|forward|backward|push_wait|
//   pull_wait}, cohort_worker_pushed_bytes_total, cohort_worker_pulled_bytes_total,
//   cohort_worker_communication_overhead_ratio (push and pull waits ÷ step time, over the last
//   window), cohort_worker_epoch, cohort_worker_step, cohort_worker_loss,
//   cohort_worker_learning_rate, cohort_worker_last_step_timestamp_seconds,
//   cohort_worker_test_top1_percent (rank 0, after each epoch),
//   cohort_worker_skipped_samples_total (damaged samples replaced, --skip_corrupt).
// Every window of at least `window` seconds of steps, the window's progress also goes to
// report_progress (the scheduler's status page, through the heartbeat).
class WorkerMetrics : public TrainingObserver {
 public:
  using ProgressSink = std::function<void(const v1::Progress&)>;

  WorkerMetrics(ProcessMetrics& process, ProgressSink report_progress, double window = 1.0);

  void StepDone(const StepReport& report) override;
  void EpochEvaluated(int64_t epoch, double test_top1) override;

 private:
  enum Phase { kData, kForward, kBackward, kPushWait, kPullWait, kNumPhases };

  prometheus::Counter& images_;
  prometheus::Counter& steps_;
  prometheus::Histogram& step_seconds_;
  std::array<prometheus::Counter*, kNumPhases> phase_seconds_;
  prometheus::Counter& pushed_bytes_;
  prometheus::Counter& pulled_bytes_;
  prometheus::Gauge& communication_overhead_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& step_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& learning_rate_;
  prometheus::Gauge& last_step_time_;
  prometheus::Gauge& test_top1_;
  prometheus::Counter& skipped_samples_;
  prometheus::Gauge& memory_peak_bytes_;

  const ProgressSink report_progress_;
  const double window_;
  // The window so far (the training thread's alone).
  int64_t window_steps_ = 0, window_images_ = 0;
  double window_seconds_ = 0, window_comm_seconds_ = 0, window_loss_ = 0;
  std::optional<double> latest_test_top1_;  // the training thread's alone
  int64_t skipped_so_far_ = 0;               // the training thread's alone
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_WORKER_METRICS_H_
