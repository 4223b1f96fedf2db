#include "services/worker/worker_metrics.h"

namespace cohort {

WorkerMetrics::WorkerMetrics(ProcessMetrics& p, ProgressSink report_progress, double window)
    : images_(p.Counter("cohort_worker_images_total", "Training images this worker has processed.")),
      steps_(p.Counter("cohort_worker_steps_total", "Training steps this worker has done.")),
      step_seconds_(p.Histogram("cohort_worker_step_seconds",
                                "Time of one training step, waiting for data included.",
                                {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10,
                                 30})),
      pushed_bytes_(p.Counter("cohort_worker_pushed_bytes_total",
                              "Gradient bytes this worker pushed to the kvstore.")),
      pulled_bytes_(p.Counter("cohort_worker_pulled_bytes_total",
                              "Parameter bytes this worker pulled from the kvstore.")),
      communication_overhead_(p.Gauge(
          "cohort_worker_communication_overhead_ratio",
          "Share of the step spent waiting on the kvstore (push and pull), last window.")),
      epoch_(p.Gauge("cohort_worker_epoch", "The epoch being trained, from 0.")),
      step_(p.Gauge("cohort_worker_step", "Training steps done.")),
      loss_(p.Gauge("cohort_worker_loss", "Mean training loss of this worker's last window.")),
      learning_rate_(p.Gauge("cohort_worker_learning_rate", "Learning rate of the last step.")),
      last_step_time_(p.Gauge("cohort_worker_last_step_timestamp_seconds",
                              "Unix time at which the last training step ended.")),
      test_top1_(p.Gauge("cohort_worker_test_top1_percent",
                         "Top-1 accuracy on the test set after the latest epoch (rank 0).")),
      skipped_samples_(p.Counter("cohort_worker_skipped_samples_total",
                                 "Damaged samples this worker skipped and replaced "
                                 "(--skip_corrupt).")),
      memory_peak_bytes_(p.Gauge("cohort_worker_memory_peak_bytes",
                                 "The most bytes of tensors in use at once so far on the "
                                 "worker's first device: GPU memory, or on CPUs the process's "
                                 "host tensors.")),
      report_progress_(std::move(report_progress)),
      window_(window) {
  auto& phases = p.CounterFamily("cohort_worker_phase_seconds_total",
                                 "Time of training steps by phase: data (waiting for the batch), "
                                 "forward, backward, push_wait, pull_wait.");
  const char* names[kNumPhases] = {"data", "forward", "backward", "push_wait", "pull_wait"};
  for (int i = 0; i < kNumPhases; ++i) phase_seconds_[i] = &phases.Add({{"phase", names[i]}});
}

void WorkerMetrics::StepDone(const StepReport& r) {
  const StepResult& s = r.step_result;
  images_.Increment(static_cast<double>(r.images));
  steps_.Increment();
  step_seconds_.Observe(r.step_seconds);
  phase_seconds_[kData]->Increment(r.data_seconds);
  phase_seconds_[kForward]->Increment(s.forward_seconds);
  phase_seconds_[kBackward]->Increment(s.backward_seconds);
  phase_seconds_[kPushWait]->Increment(s.push_seconds);
  phase_seconds_[kPullWait]->Increment(s.pull_seconds);
  pushed_bytes_.Increment(static_cast<double>(s.pushed_bytes));
  pulled_bytes_.Increment(static_cast<double>(s.pulled_bytes));
  epoch_.Set(static_cast<double>(r.epoch));
  step_.Set(static_cast<double>(r.step));
  learning_rate_.Set(r.lr);
  last_step_time_.SetToCurrentTime();
  memory_peak_bytes_.Set(static_cast<double>(r.memory_peak_bytes));
  if (r.skipped_samples > skipped_so_far_) {
    skipped_samples_.Increment(static_cast<double>(r.skipped_samples - skipped_so_far_));
    skipped_so_far_ = r.skipped_samples;
  }

  ++window_steps_;
  window_images_ += r.images;
  window_seconds_ += r.step_seconds;
  window_comm_seconds_ += s.comm_seconds();
  window_loss_ += s.loss;
  if (window_seconds_ < window_) return;
  const double overhead = window_comm_seconds_ / window_seconds_;
  const double loss = window_loss_ / static_cast<double>(window_steps_);
  communication_overhead_.Set(overhead);
  loss_.Set(loss);
  if (report_progress_) {
    v1::Progress progress;
    progress.set_step(r.step);
    progress.set_epoch(r.epoch);
    progress.set_images_per_second(static_cast<double>(window_images_) / window_seconds_);
    progress.set_step_seconds(window_seconds_ / static_cast<double>(window_steps_));
    progress.set_communication_overhead(overhead);
    progress.set_loss(loss);
    progress.set_total_steps(r.total_steps);
    if (latest_test_top1_.has_value()) progress.set_test_top1(*latest_test_top1_);
    report_progress_(progress);
  }
  window_steps_ = window_images_ = 0;
  window_seconds_ = window_comm_seconds_ = window_loss_ = 0;
}

void WorkerMetrics::EpochEvaluated(int64_t /*epoch*/, double test_top1) {
  latest_test_top1_ = test_top1;
  test_top1_.Set(test_top1);
}

}  // namespace cohort
