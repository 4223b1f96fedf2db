#include "services/scheduler/scheduler_metrics.h"

namespace cohort {
namespace {

// The core counts from the start; a counter catches up with it.
void CatchUp(prometheus::Counter& counter, int64_t count) {
  const double n = static_cast<double>(count);
  if (n > counter.Value()) counter.Increment(n - counter.Value());
}

}  // namespace

SchedulerMetrics::SchedulerMetrics(ProcessMetrics& p, const JobSpec& spec,
                                   double baseline_images_per_second)
    : barrier_wait_(p.Histogram("cohort_scheduler_barrier_wait_seconds",
                                "Time from a barrier's first arrival to its release.",
                                {0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300})),
      barrier_calls_(p.Counter("cohort_scheduler_barrier_calls_total",
                               "Barrier calls the scheduler answered.")),
      barrier_arrivals_(p.Counter(
          "cohort_scheduler_barrier_arrivals_total",
          "Workers' arrivals at barriers: a call from a host's meeting brings all of its own.")),
      straggler_rank_(p.Gauge("cohort_scheduler_straggler_rank",
                              "Rank of the worker with the most compute a step (-1: none).")),
      straggler_lag_seconds_(p.Gauge(
          "cohort_scheduler_straggler_lag_seconds",
          "How much more compute a step the slowest worker takes than the fastest.")),
      straggler_lag_steps_(p.Gauge("cohort_scheduler_straggler_lag_steps",
                                   "Steps the slowest worker is behind the furthest one.")) {
  auto& members = p.GaugeFamily("cohort_scheduler_members",
                                "Members of the job by role and state (missing, alive, stopped, "
                                "dead).");
  auto& missed = p.CounterFamily(
      "cohort_scheduler_missed_heartbeats_total",
      "Heartbeats that did not come on time (a silence of k intervals misses k - 1).");
  for (int r = 0; r < kNumMemberRoles; ++r) {
    const std::string role = RoleName(static_cast<MemberRole>(r));
    for (int s = 0; s < kNumMemberStates; ++s) {
      members_[r][s] = &members.Add(
          {{"member_role", role}, {"state", MemberStateName(static_cast<MemberState>(s))}});
    }
    missed_heartbeats_[r] = &missed.Add({{"member_role", role}});
  }
  auto& job_state = p.GaugeFamily("cohort_scheduler_job_state",
                                  "1 for the job's state (FORMING, RUNNING, DONE, FAILED), 0 for "
                                  "the others.");
  for (int s = 0; s < kNumJobStates; ++s) {
    job_state_[s] = &job_state.Add({{"state", JobStateName(static_cast<JobState>(s))}});
  }
  p.Gauge("cohort_scheduler_workers", "Workers the job has.").Set(spec.num_workers);
  p.Gauge("cohort_scheduler_shards", "Parameter shards the job has.").Set(spec.num_shards);
  if (baseline_images_per_second > 0) {
    p.Gauge("cohort_scheduler_baseline_images_per_second",
            "Images/sec of one worker training alone (recorded baseline).")
        .Set(baseline_images_per_second);
  }
}

void SchedulerMetrics::Update(const SchedulerSnapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  for (int r = 0; r < kNumMemberRoles; ++r) {
    for (int s = 0; s < kNumMemberStates; ++s) members_[r][s]->Set(snapshot.members[r][s]);
    CatchUp(*missed_heartbeats_[r], snapshot.missed_heartbeats[r]);
  }
  for (int s = 0; s < kNumJobStates; ++s) {
    job_state_[s]->Set(static_cast<int>(snapshot.state) == s ? 1 : 0);
  }
  CatchUp(barrier_calls_, snapshot.barrier_calls);
  CatchUp(barrier_arrivals_, snapshot.barrier_arrivals);
  for (absl::Duration wait : snapshot.barrier_waits) {
    barrier_wait_.Observe(absl::ToDoubleSeconds(wait));
  }
  const Straggler none;
  const Straggler& s = snapshot.straggler.value_or(none);
  straggler_rank_.Set(s.rank);
  straggler_lag_seconds_.Set(s.lag_seconds);
  straggler_lag_steps_.Set(static_cast<double>(s.lag_steps));
}

}  // namespace cohort
