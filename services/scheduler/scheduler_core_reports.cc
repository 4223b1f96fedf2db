#include "services/scheduler/scheduler_core.h"

#include <optional>
#include <string>
#include <vector>

// What the core reports of the job: the /status page, the metrics' snapshot and the straggler.
// The rest of SchedulerCore: scheduler_core.cc.

namespace cohort {

MemberState SchedulerCore::StateOf(const Member& m) {
  if (!m.registered) return MemberState::kMissing;
  if (m.dead) return MemberState::kDead;
  if (m.stopped) return MemberState::kStopped;
  return MemberState::kAlive;
}

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
  status.straggler = Slowest();
  for (MemberRole role : {MemberRole::kShard, MemberRole::kWorker}) {
    const std::vector<Member>& ms = role == MemberRole::kShard ? shards_ : workers_;
    for (size_t r = 0; r < ms.size(); ++r) {
      const Member& m = ms[r];
      status.members.push_back(
          {role, static_cast<int>(r), StateOf(m), m.host, m.pid, m.address,
           m.registered ? absl::ToDoubleSeconds(now - m.last_heartbeat) : -1.0, m.last_error,
           m.has_progress ? std::make_optional(m.progress) : std::nullopt});
    }
  }
  return status;
}

std::optional<Straggler> SchedulerCore::FindStraggler() const {
  absl::MutexLock lock(&mu_);
  return Slowest();
}

std::optional<Straggler> SchedulerCore::Slowest() const {
  std::vector<WorkerPace> paces;
  for (size_t r = 0; r < workers_.size(); ++r) {
    const Member& w = workers_[r];
    if (!w.has_progress || StateOf(w) != MemberState::kAlive) continue;
    paces.push_back({static_cast<int>(r), w.host, w.progress});
  }
  return SlowestWorker(paces);
}

void SchedulerCore::ReportStraggler(absl::Time now) {
  if (now - straggler_reported_ < spec_.straggler_report_interval) return;
  const std::optional<Straggler> s = Slowest();
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
    for (const Member& m : Members(role)) ++s.members[r][static_cast<int>(StateOf(m))];
    s.missed_heartbeats[r] = missed_heartbeats_[r];
  }
  s.barrier_waits = barrier_.TakeWaits();
  s.barrier_calls = barrier_.calls();
  s.barrier_arrivals = barrier_.arrivals();
  s.straggler = Slowest();
  return s;
}

}  // namespace cohort
