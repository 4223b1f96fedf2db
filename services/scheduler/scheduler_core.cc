#include "services/scheduler/scheduler_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/common/count_text.h"
#include "services/membership/job_membership.h"

namespace cohort {

absl::Duration HeartbeatIntervalFor(int members, absl::Duration timeout) {
  constexpr absl::Duration kShortest = absl::Milliseconds(250);
  constexpr absl::Duration kLongest = absl::Seconds(5);
  constexpr double kHeardPerSecond = 500;
  const absl::Duration most = std::min(timeout / 3, kLongest);
  return std::max(std::min(absl::Seconds(members / kHeardPerSecond), most),
                  std::min(kShortest, most));
}

absl::Duration AutomaticHeartbeatTimeout(int members) {
  return std::max(JobSpec().heartbeat_timeout,
                  3 * HeartbeatIntervalFor(members, absl::InfiniteDuration()));
}

SchedulerCore::SchedulerCore(JobSpec spec, Clock* clock, JobJournal* journal)
    : spec_(std::move(spec)),
      clock_(clock),
      journal_(journal),
      started_(clock->Now()),
      straggler_reported_(started_),
      roster_(spec_.num_shards, spec_.num_workers, spec_.heartbeat_interval) {
  shard_restarts_.resize(spec_.num_shards);
  for (int r = 0; r < spec_.num_workers; ++r) active_.push_back(r);
  if (journal_ != nullptr) {
    absl::MutexLock lock(&mu_);
    TakeOver(journal_->state());
  }
}

void SchedulerCore::TakeOver(const JournalState& journal) {
  for (const auto& [rank, finished] : journal.finished_workers) {
    roster_.FinishedBefore(rank, finished.host, finished.pid, clock_->Now());
  }
  if (journal.shares.has_value() && journal.shares->leaders.size() == roster_.shards().size()) {
    // The replicated shards as the scheduler before left them: a dead one will not register.
    shares_placed_.Restore(*journal.shares);
    for (int rank : journal.shares->dead) roster_.DeadBefore(rank);
  }
  if (journal.end.has_value()) {
    state_ = *journal.end;
    reason_ = journal.reason;
    return;
  }
  if (!journal.finished_workers.empty()) EndIfAllFinished();
}

void SchedulerCore::Journalled(const absl::Status& written) {
  if (written.ok() || journal_failed_) return;
  journal_failed_ = true;
  notices_.push_back(absl::StrCat("warning: ", written.message(),
                                  "; a scheduler restarted now would not know what it records"));
}

void SchedulerCore::End(JobState state, std::string reason) {
  if (Ended()) return;
  if (journal_ != nullptr) Journalled(journal_->RecordEnd(state, reason));
  state_ = state;
  reason_ = std::move(reason);
  barrier_.Abandon(absl::AbortedError(reason_));
  AnswerClusterWaiters();
  if (change_listener_) change_listener_(state_, generation_, reason_);
}

void SchedulerCore::EndIfAllFinished() {
  if (Ended()) return;
  for (int w : active_) {
    if (!roster_.workers()[w].stopped || !roster_.workers()[w].last_error.empty()) return;
  }
  End(JobState::kDone, active_.size() == 1 ? std::string("the worker finished")
                                           : absl::StrCat("all ", active_.size(),
                                                          " workers finished"));
}

void SchedulerCore::Fail(const std::string& reason) {
  const std::vector<std::string> missing = roster_.Unregistered();
  if (state_ != JobState::kForming || missing.empty()) return End(JobState::kFailed, reason);
  // Before the job ran: whoever had not joined is what a person looks at first (a member whose
  // program failed before it joined, and the launcher then stopped the others).
  End(JobState::kFailed, absl::StrCat(reason, " while the job formed (missing ",
                                      absl::StrJoin(missing, ", "), ")"));
}

absl::StatusOr<int> SchedulerCore::Register(const MemberRegistration& r) {
  absl::MutexLock lock(&mu_);
  const char* role = RoleName(r.role);
  std::vector<Member>& members = roster_.of(r.role);
  const bool known_rank =
      r.requested_rank >= 0 && r.requested_rank < static_cast<int>(members.size());
  if (r.rejoin && known_rank && members[r.requested_rank].registered) {
    Member& m = members[r.requested_rank];
    if (m.pid == r.pid && m.host == r.host && (!m.dead || m.restarting)) {
      // The same process: its control stream broke for a moment (a shard taken for dead
      // comes back as it was; a worker's break already failed the job).
      m.dead = m.restarting = false;
      m.last_heartbeat = clock_->Now();
      AnswerClusterWaiters();
      return r.requested_rank;
    }
  }
  if (r.rejoin && known_rank && state_ == JobState::kDone) {
    // The job ended while this member's scheduler was away (this one took it over): its first
    // heartbeat tells it so.
    roster_.Enroll(members[r.requested_rank], r, clock_->Now());
    return r.requested_rank;
  }
  if (state_ == JobState::kRunning && r.role == MemberRole::kWorker && spec_.elastic &&
      !r.rejoin) {
    return Join(r);
  }
  if (state_ == JobState::kRunning && r.role == MemberRole::kShard && !r.rejoin) {
    // A new process at the rank of a shard not yet known dead: the old one is.
    if (known_rank && members[r.requested_rank].registered && !members[r.requested_rank].dead &&
        !members[r.requested_rank].restarting && spec_.shard_restart_grace > absl::ZeroDuration()) {
      Died(MemberRole::kShard, r.requested_rank,
           absl::StrFormat("replaced by a new process (pid %d)", r.pid));
    }
    return Reregister(r);
  }
  if (state_ != JobState::kForming) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", spec_.job_id, " is ", JobStateName(state_), "; a ", role,
        " can only join while it forms (start a new job)"));
  }
  int rank = r.requested_rank;
  if (rank < 0) {
    for (rank = 0; rank < static_cast<int>(members.size()) && members[rank].registered; ++rank) {
    }
    if (rank == static_cast<int>(members.size())) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", spec_.job_id, " already has all its ", members.size(), " ", role,
          "s; check -n/-s (--num_workers/--num_shards) on the scheduler"));
    }
  } else if (rank >= static_cast<int>(members.size())) {
    return absl::InvalidArgumentError(absl::StrCat(role, " rank ", rank, " requested, but job ",
                                                   spec_.job_id, " has ", members.size(), " ",
                                                   role, "s (ranks 0..", members.size() - 1, ")"));
  } else if (members[rank].registered) {
    return absl::AlreadyExistsError(absl::StrCat(role, " rank ", rank, " is already taken by ",
                                                 roster_.Describe(r.role, rank)));
  }
  if (absl::Status s = roster_.CheckReachable(r, rank); !s.ok()) return s;
  if (r.rejoin) {
    notices_.push_back(absl::StrFormat("%s %d (host %s, pid %d) joined again: this scheduler "
                                       "took over a running job",
                                       role, rank, r.host, r.pid));
  }
  return Admit(r, rank);
}

int SchedulerCore::Admit(const MemberRegistration& r, int rank) {
  roster_.Enroll(roster_.of(r.role)[rank], r, clock_->Now());
  if (r.role == MemberRole::kWorker) {
    if (std::optional<std::string> notice = roster_.OversubscribedNotice(r.host)) {
      notices_.push_back(*std::move(notice));
    }
  }
  if (roster_.AllRegistered()) {
    state_ = JobState::kRunning;
    std::vector<std::string> addresses;
    for (const Member& s : roster_.shards()) addresses.push_back(s.address);
    shares_placed_.Place(addresses, spec_.shard_replicas);
  }
  AnswerClusterWaiters();
  return rank;
}

absl::StatusOr<int> SchedulerCore::Join(const MemberRegistration& r) {
  const int most = spec_.max_workers > 0 ? spec_.max_workers : spec_.num_workers;
  if (static_cast<int>(active_.size()) >= most) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job ", spec_.job_id, " already runs ", active_.size(), " workers, its --max_workers=",
        most, "; start it with a larger --max_workers to add more"));
  }
  const int rank = static_cast<int>(roster_.workers().size());
  if (absl::Status s = roster_.CheckReachable(r, rank); !s.ok()) return s;
  roster_.AddWorker();
  Admit(r, rank);
  active_.push_back(rank);
  NewGeneration(absl::StrFormat("worker %d (host %s, pid %d) joined", rank, r.host, r.pid));
  return rank;
}

void SchedulerCore::NewGeneration(const std::string& why) {
  ++generation_;
  generation_why_ = why;
  roster_.ForgetHostGroups();
  // Waiters leave unpassed; the new generation starts afresh.
  barrier_.Abandon(MembershipChangedError(generation_, generation_why_));
  if (change_listener_) change_listener_(state_, generation_, std::string());
  notices_.push_back(absl::StrCat(why, ": generation ", generation_, " with ", active_.size(),
                                  " workers; they go back to the shards' newest checkpoint"));
}

bool SchedulerCore::Active(int rank) const {
  return std::find(active_.begin(), active_.end(), rank) != active_.end();
}

void SchedulerCore::Died(MemberRole role, int rank, const std::string& why) {
  Member& m = roster_.of(role)[rank];
  m.dead = true;
  if (role == MemberRole::kShard && state_ == JobState::kRunning && shares_placed_.placed()) {
    const absl::StatusOr<std::string> moved =
        shares_placed_.HandOver(rank, [this](int shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return roster_.Describe(MemberRole::kShard, shard);
        });
    if (!moved.ok()) {
      Fail(absl::StrCat(roster_.Describe(role, rank), " is dead: ", why, "; ", moved.status().message()));
      return;
    }
    RecordShares();
    m.died_at = clock_->Now();
    notices_.push_back(absl::StrCat(roster_.Describe(role, rank), " died (", why, "): ", *moved));
    return;
  }
  if (role == MemberRole::kShard && spec_.shard_restart_grace > absl::ZeroDuration() &&
      state_ == JobState::kRunning && spec_.max_shard_restarts > 0 &&
      shard_restarts_[rank] >= spec_.max_shard_restarts) {
    Fail(absl::StrFormat("%s is dead: %s; it was restarted %d times already, the most "
                         "--max_shard_restarts (launch --restart_failed_shards) allows",
                         roster_.Describe(role, rank), why, shard_restarts_[rank]));
    return;
  }
  if (role == MemberRole::kShard && spec_.shard_restart_grace > absl::ZeroDuration() &&
      state_ == JobState::kRunning) {
    m.restarting = true;
    m.died_at = clock_->Now();
    m.death = why;
    notices_.push_back(absl::StrCat(roster_.Describe(role, rank), " died (", why, "); waiting up to ",
                                    absl::FormatDuration(spec_.shard_restart_grace),
                                    " for it to restart"));
    return;
  }
  if (role == MemberRole::kWorker && spec_.elastic && state_ == JobState::kRunning) {
    if (!Active(rank)) return;  // its death is known
    active_.erase(std::find(active_.begin(), active_.end(), rank));
    if (static_cast<int>(active_.size()) >= spec_.min_workers) {
      NewGeneration(absl::StrCat(roster_.Describe(role, rank), " died (", why, ")"));
      return;
    }
    Fail(absl::StrFormat("%s is dead: %s; %s left, fewer than --min_workers=%d",
                         roster_.Describe(role, rank), why, Count(active_.size(), "worker"),
                         spec_.min_workers));
    return;
  }
  const bool lost_first = role == MemberRole::kShard && held_failure_.has_value() &&
                          held_failure_->shard == rank;
  Fail(absl::StrFormat("%s is dead: %s; last error: %s%s", roster_.Describe(role, rank), why,
                       m.last_error.empty() ? "none reported" : m.last_error,
                       lost_first ? absl::StrCat("; before that, ", held_failure_->reason) : ""));
}

std::vector<std::string> SchedulerCore::TakeNotices() {
  absl::MutexLock lock(&mu_);
  return std::move(notices_);
}

JobState SchedulerCore::Heartbeat(MemberRole role, int rank, const WorkerProgress* progress,
                                  int64_t pid) {
  absl::MutexLock lock(&mu_);
  if (Member* m = roster_.FindProcess(role, rank, pid)) {
    roster_.Heard(role, *m, clock_->Now(), progress);
  }
  return state_;
}

void SchedulerCore::ControlStreamEnded(MemberRole role, int rank, const std::string& detail,
                                       int64_t pid) {
  absl::MutexLock lock(&mu_);
  Member* m = roster_.FindProcess(role, rank, pid);
  if (m == nullptr) return;
  m->stream_open = false;  // a dead member's too: the scheduler waits for no stream at the end
  if (m->restarting || m->dead) return;  // its death is known
  m->stream_end = detail;
  // A member closes its stream only after saying it stops, or once the job has ended (what the
  // shards do): anything else is a death, noticed at once rather than after the heartbeat
  // timeout.
  if (!m->stopped && Ended()) {
    m->stopped = true;
  } else if (!m->stopped) {
    Died(role, rank, absl::StrCat("its control stream ended (", detail, ") without a stop"));
  }
}

int64_t SchedulerCore::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void SchedulerCore::MemberStopped(MemberRole role, int rank, const std::string& error,
                                  std::optional<int> lost_shard) {
  absl::MutexLock lock(&mu_);
  Member* m = roster_.Find(role, rank);
  if (m == nullptr && error.empty() && role == MemberRole::kWorker && rank >= 0 &&
      rank < static_cast<int>(roster_.workers().size()) && state_ == JobState::kForming) {
    // It finished while this scheduler took the job over, before it joined again.
    m = &roster_.workers()[rank];
    m->registered = true;
    m->last_heartbeat = clock_->Now();
  }
  if (m == nullptr) return;
  m->stopped = true;
  if (!error.empty()) {
    m->last_error = error;
    const bool survivable =
        state_ == JobState::kRunning &&
        ((role == MemberRole::kWorker && spec_.elastic) ||
         (role == MemberRole::kShard && spec_.shard_restart_grace > absl::ZeroDuration()));
    if (survivable) {
      Died(role, rank, error);
      return;
    }
    m->dead = true;
    std::string reason = absl::StrCat(roster_.Describe(role, rank), " failed: ", error);
    const Member* lost =
        lost_shard.has_value() ? roster_.Find(MemberRole::kShard, *lost_shard) : nullptr;
    if (lost != nullptr && !lost->dead && !lost->stopped && state_ == JobState::kRunning &&
        !held_failure_.has_value()) {
      held_failure_ =
          HeldFailure{std::move(reason), *lost_shard, clock_->Now() + spec_.heartbeat_timeout};
      return;
    }
    Fail(reason);
    return;
  }
  if (role != MemberRole::kWorker || Ended()) return;
  if (journal_ != nullptr) Journalled(journal_->RecordFinished(rank, m->host, m->pid));
  EndIfAllFinished();
}

void SchedulerCore::Stop(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  Fail(reason);
}

void SchedulerCore::CheckLiveness() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (state_ == JobState::kForming) {
    if (now - started_ < spec_.form_timeout) return;
    End(JobState::kFailed,
        absl::StrCat("job ", spec_.job_id, " did not form within ",
                     absl::FormatDuration(spec_.form_timeout), ": missing ",
                     absl::StrJoin(roster_.Unregistered(), ", "),
                     "; start them with --scheduler=<this scheduler's address>"));
    return;
  }
  if (state_ != JobState::kRunning) return;
  if (held_failure_.has_value() && now >= held_failure_->until) {
    Fail(held_failure_->reason);  // the shard it lost is alive: the worker's own failure
    return;
  }
  ReportStraggler(now);
  for (MemberRole role : {MemberRole::kShard, MemberRole::kWorker}) {
    std::vector<Member>& ms = roster_.of(role);
    for (size_t r = 0; r < ms.size(); ++r) {
      Member& m = ms[r];
      if (m.stopped) continue;
      if (m.restarting) {
        if (now - m.died_at < spec_.shard_restart_grace) continue;
        Fail(absl::StrFormat("%s died (%s) and did not come back within %s "
                             "(launch --restart_failed_shards restarts it; see its log)",
                             roster_.Describe(role, static_cast<int>(r)), m.death,
                             absl::FormatDuration(spec_.shard_restart_grace)));
        return;
      }
      if (m.dead) continue;  // an elastic job's worker, gone
      const absl::Duration silent = now - m.last_heartbeat;
      // The beats that should have come by now, less the one that may be on its way.
      roster_.CountMissedHeartbeats(role, m, now);
      if (silent < spec_.heartbeat_timeout) continue;
      Died(role, static_cast<int>(r),
           absl::StrFormat("no heartbeat for %s (limit %s)",
                           absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100))),
                           absl::FormatDuration(spec_.heartbeat_timeout)));
      if (Ended()) return;
    }
  }
}

JobState SchedulerCore::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

std::string SchedulerCore::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

bool SchedulerCore::WaitUntilEnded(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(+[](JobState* s) { return *s == JobState::kDone || *s == JobState::kFailed; },
                      &state_),
      timeout);
}

bool SchedulerCore::WaitForMembersToLeave(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(+[](SchedulerCore* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                        return !self->roster_.AnyStreamOpen();
                      },
                      this),
      timeout);
}

}  // namespace cohort
