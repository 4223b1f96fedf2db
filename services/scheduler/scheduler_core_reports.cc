#include "services/scheduler/scheduler_core.h"

#include <optional>
#include <string>
#include <vector>

// What the core reports of the job: the /status page, the metrics' snapshot and the straggler.
// The rest of SchedulerCore: scheduler_core.cc.

namespace cohort {

std::string SchedulerCore::StatusJson() const { return JobStatusJson(Status()); }

JobStatus SchedulerCore::Status() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  JobStatus status;
  status.job_id = spec_.job_id;
  status.state = state_;
  status.reason = reason_;
  status.mode = spec_.mode;
  status.generation = generation_;
  status.workers = active_;
  status.num_shards = spec_.num_shards;
  status.seconds_since_start = absl::ToDoubleSeconds(now - started_);
  status.straggler = roster_.Slowest();
  status.members = roster_.Statuses(now);
  return status;
}

std::optional<Straggler> SchedulerCore::FindStraggler() const {
  absl::MutexLock lock(&mu_);
  return roster_.Slowest();
}

void SchedulerCore::ReportStraggler(absl::Time now) {
  if (now - straggler_reported_ < spec_.straggler_report_interval) return;
  const std::optional<Straggler> s = roster_.Slowest();
  if (!s.has_value()) return;
  std::optional<std::string> notice = StragglerNotice(
      *s, spec_.straggler_share, absl::ToDoubleSeconds(spec_.straggler_min_lag), spec_.mode);
  if (!notice.has_value()) return;
  straggler_reported_ = now;
  notices_.push_back(*std::move(notice));
}

SchedulerSnapshot SchedulerCore::TakeSnapshot() {
  absl::MutexLock lock(&mu_);
  SchedulerSnapshot s;
  s.state = state_;
  for (MemberRole role : {MemberRole::kShard, MemberRole::kWorker}) {
    const int r = static_cast<int>(role);
    for (const Member& m : roster_.of(role)) {
      ++s.members[r][static_cast<int>(MemberRoster::StateOf(m))];
    }
    s.missed_heartbeats[r] = roster_.missed_heartbeats(role);
  }
  s.barrier_waits = barrier_.TakeWaits();
  s.barrier_calls = barrier_.calls();
  s.barrier_arrivals = barrier_.arrivals();
  s.straggler = roster_.Slowest();
  return s;
}

}  // namespace cohort
