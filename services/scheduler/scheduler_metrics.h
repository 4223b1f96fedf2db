#ifndef COHORT_SERVICES_SCHEDULER_SCHEDULER_METRICS_H_
#define COHORT_SERVICES_SCHEDULER_SCHEDULER_METRICS_H_

#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "services/common/metrics.h"
#include "services/scheduler/scheduler_core.h"

namespace cohort {

// The scheduler's metrics, set from the core's snapshot at each scrape:
//   cohort_scheduler_members{member_role, state}, cohort_scheduler_job_state{state} (1 for the
//   current one), cohort_scheduler_missed_heartbeats_total{member_role},
//   cohort_scheduler_barrier_wait_seconds (first arrival to release),
//   cohort_scheduler_barrier_calls_total and cohort_scheduler_barrier_arrivals_total (the
//   workers' arrivals those calls brought: a host's meeting brings all of its own),
//   cohort_scheduler_workers,
//   cohort_scheduler_shards and, when a baseline was recorded,
//   cohort_scheduler_baseline_images_per_second (one worker alone: the scaling-efficiency
//   rule's denominator); the straggler: cohort_scheduler_straggler_rank (-1: none),
//   cohort_scheduler_straggler_lag_seconds and cohort_scheduler_straggler_lag_steps.
class SchedulerMetrics {
 public:
  // baseline_images_per_second <= 0: unknown, not exported.
  SchedulerMetrics(ProcessMetrics& process, const JobSpec& spec,
                   double baseline_images_per_second);

  // Thread-safe: concurrent scrapes each call it.
  void Update(const SchedulerSnapshot& snapshot);

 private:
  absl::Mutex mu_;  // the counters catch up with the snapshot one caller at a time
  prometheus::Gauge* members_[kNumMemberRoles][kNumMemberStates];
  prometheus::Gauge* job_state_[kNumJobStates];
  prometheus::Counter* missed_heartbeats_[kNumMemberRoles];
  prometheus::Histogram& barrier_wait_;
  prometheus::Counter& barrier_calls_;
  prometheus::Counter& barrier_arrivals_;
  prometheus::Gauge& straggler_rank_;
  prometheus::Gauge& straggler_lag_seconds_;
  prometheus::Gauge& straggler_lag_steps_;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_SCHEDULER_METRICS_H_
