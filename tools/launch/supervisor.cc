#include "tools/launch/supervisor.h"

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/launch/child_process.h"

namespace cohort::launch {
namespace {

// How long the others may take to end on their own after a process failed (+ linger), and after
// every worker finished (+ linger).
constexpr absl::Duration kEndAfterFailure = absl::Seconds(3);
// After the scheduler failed: members first wait out their grace for it (--scheduler_grace,
// 3 s by default), then say they lost it and exit.
constexpr absl::Duration kEndAfterSchedulerLoss = absl::Seconds(6);  // 3 s + kEndAfterFailure
constexpr absl::Duration kEndAfterWorkers = absl::Seconds(10);
// From stop to SIGKILL, when the launcher stops the job and when the user interrupts it.
constexpr absl::Duration kTermGrace = absl::Seconds(2);
// With hosts: a remote member's wrapper needs up to 2 s itself, and its last words travel back.
constexpr absl::Duration kRemoteTermGrace = absl::Seconds(4);
constexpr absl::Duration kInterruptGrace = absl::Seconds(5);

}  // namespace

void Supervisor::Start(absl::Time now) { deadline_ = now + o_.start_timeout; }

void Supervisor::Run(std::string scheduler_address) {
  scheduler_address_ = std::move(scheduler_address);
  phase_ = Phase::kRunning;
  deadline_.reset();
}

void Supervisor::OnEnd(int member, absl::Time now) {
  if (phase_ == Phase::kTerminating || phase_ == Phase::kKilling) return;  // we stopped it
  const MemberStatus m = table_.Members()[member];
  const int status = *m.wait_status;
  if (status != 0 && m.role != Role::kWorker && o_.job_done()) {
    Say(absl::StrCat(m.description, " ", DescribeWaitStatus(status),
                     " after the job was DONE; its result stands"));
    if (m.role == Role::kScheduler) EndWithin(kEndAfterWorkers, "the scheduler ended", now);
    return;
  }
  if (phase_ == Phase::kRunning) {
    RestartDecision decision =
        policy_.OnEnd({m.role, m.rank, m.description, m.remote, status}, scheduler_address_);
    if (decision.action != RestartDecision::Action::kNone) Say(decision.message);
    switch (decision.action) {
      case RestartDecision::Action::kNone:
        break;
      case RestartDecision::Action::kRestart:
        if (m.role == Role::kScheduler) restarts_.scheduler = true;
        if (m.role == Role::kShard) restarts_.shards.push_back(m.rank);
        if (m.role == Role::kWorker) restarts_.workers.push_back({decision.new_worker, m.rank});
        return;
      case RestartDecision::Action::kGoOnWithout:
        return;
      case RestartDecision::Action::kGiveUp:
        return Failed(m, now);
    }
  }
  if (status != 0) {
    // ssh's own status when it cannot reach the host or loses it (a program's is passed on).
    const bool ssh_failed = m.remote && ExitCodeOf(status) == 255;
    Say(absl::StrCat(m.description, " ", DescribeWaitStatus(status),
                     phase_ == Phase::kStarting ? " before it wrote its port file" : "",
                     ssh_failed ? " (ssh's status: the host could not be reached, refused the "
                                  "login, or the connection to it was lost; see above)"
                                : ""));
    return Failed(m, now);
  }
  if (m.role == Role::kScheduler && phase_ == Phase::kStarting) {
    Say(absl::StrCat(m.description, " exited before it wrote its port file"));
    Fail(1, "the scheduler ended", kEndAfterFailure, now);
  } else if (m.role == Role::kScheduler) {
    EndWithin(kEndAfterWorkers, "the scheduler ended", now);
  } else if (m.role == Role::kWorker && AllWorkersSucceeded(table_.Members())) {
    EndWithin(kEndAfterWorkers, "every worker finished", now);
  }
}

void Supervisor::Failed(const MemberStatus& m, absl::Time now) {
  Fail(ExitCodeOf(*m.wait_status), absl::StrCat(m.name, " failed"),
       m.role == Role::kScheduler ? kEndAfterSchedulerLoss : kEndAfterFailure, now);
}

// Elastic: every worker has ended, some finished and the others died.
bool Supervisor::AllWorkersSucceeded(const std::vector<MemberStatus>& members) const {
  int done = 0, running = 0;
  for (const MemberStatus& m : members) {
    if (m.role != Role::kWorker) continue;
    if (!m.wait_status.has_value()) {
      ++running;
    } else if (*m.wait_status == 0) {
      ++done;
    }
  }
  return o_.elastic ? running == 0 && done > 0 : done == o_.num_workers;
}

void Supervisor::OnSignal(int sig, absl::Time now) {
  if (sig != SIGINT && sig != SIGTERM) return;
  if (interrupted_ != 0 || phase_ == Phase::kKilling) {
    Say(absl::StrCat("interrupted again; killing ", Count(Running().size(), "process")));
    Kill();
    return;
  }
  interrupted_ = sig;
  Say(absl::StrCat("interrupted; stopping ", Count(Running().size(), "process")));
  Terminate(kInterruptGrace, now);
}

void Supervisor::Abort(absl::Time now) {
  if (!failure_.has_value()) failure_ = 1;
  Terminate(o_.remote ? kRemoteTermGrace : kTermGrace, now);
}

void Supervisor::Tick(absl::Time now) {
  if (!deadline_.has_value() || now < *deadline_) return;
  switch (phase_) {
    case Phase::kStarting:
      Say(absl::StrCat("the scheduler did not write its port file ", o_.scheduler_port_file,
                       " within ", absl::FormatDuration(o_.start_timeout),
                       "; stopping the job (see the scheduler's output above)"));
      Abort(now);
      break;
    case Phase::kEnding:
      Say(absl::StrCat(NamesOf(Running()), " still running ", absl::FormatDuration(ending_wait_),
                       " after ", ending_why_, "; sending SIGTERM"));
      Abort(now);
      break;
    case Phase::kTerminating:
      Say(absl::StrCat(NamesOf(Running()), " still running after SIGTERM; sending SIGKILL"));
      Kill();
      break;
    case Phase::kRunning:
    case Phase::kKilling:
      deadline_.reset();
      break;
  }
}

Restarts Supervisor::TakeRestarts() {
  Restarts restarts;
  std::swap(restarts, restarts_);
  if (phase_ != Phase::kRunning) return {};  // something else failed meanwhile: the job ends
  return restarts;
}

int Supervisor::Finish() {
  const int status = interrupted_ != 0 ? 128 + interrupted_ : failure_.value_or(0);
  if (interrupted_ != 0) {
    Say(absl::StrCat("job ", o_.job_id, " interrupted"));
  } else if (status == 0) {
    Say(absl::StrCat("job ", o_.job_id, " finished"));
  } else {
    if (!verdict_.has_value()) verdict_ = o_.failure_reason();
    Say(absl::StrCat("job ", o_.job_id, " failed (exit status ", status, ")",
                     verdict_->empty() ? "" : ": ", *verdict_));
  }
  return status;
}

// Records the job's status (the first failure's) and lets the others end on their own within
// linger + extra.
void Supervisor::Fail(int exit_code, std::string why, absl::Duration extra, absl::Time now) {
  if (!failure_.has_value()) failure_ = exit_code;
  EndWithin(extra, std::move(why), now);
}

// The remaining processes get linger + `extra` to end on their own (the scheduler tells them to
// stop), unless an earlier end is set already.
void Supervisor::EndWithin(absl::Duration extra, std::string why, absl::Time now) {
  if (phase_ == Phase::kTerminating || phase_ == Phase::kKilling) return;
  const absl::Time end = now + absl::Seconds(o_.linger_s) + extra;
  if (phase_ != Phase::kEnding || end < *deadline_) {
    deadline_ = end;
    ending_wait_ = end - now;
    ending_why_ = std::move(why);
  }
  phase_ = Phase::kEnding;
}

void Supervisor::Terminate(absl::Duration grace, absl::Time now) {
  if (!verdict_.has_value()) verdict_ = o_.failure_reason();
  for (int m : Running()) table_.Stop(m);
  phase_ = Phase::kTerminating;
  deadline_ = now + grace;
}

void Supervisor::Kill() {
  for (int m : Running()) table_.Kill(m);
  phase_ = Phase::kKilling;
  deadline_.reset();
}

std::vector<int> Supervisor::Running() const {
  const std::vector<MemberStatus> members = table_.Members();
  std::vector<int> running;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!members[i].wait_status.has_value()) running.push_back(static_cast<int>(i));
  }
  return running;
}

std::string Supervisor::NamesOf(const std::vector<int>& indices) const {
  const std::vector<MemberStatus> members = table_.Members();
  return absl::StrJoin(indices, ", ", [&](std::string* out, int i) {
    out->append(members[i].description);
  });
}

}  // namespace cohort::launch
