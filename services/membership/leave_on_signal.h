#ifndef COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_
#define COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_

#include "absl/time/time.h"
#include "services/membership/member_session.h"

namespace cohort {

// A shard's or worker's answer to SIGTERM/SIGINT (a container engine, Kubernetes, scancel):
// while a LeavingOnSignal holds the process's session (it joined its job), it leaves saying so
// ("stopped by SIGTERM": the scheduler fails the job naming it, waits for a restartable shard,
// or an elastic job goes on without a worker), waiting at most a second for the scheduler; then
// the process exits at once with 128 + signo. Streams are not drained: a checkpoint being
// written stays incomplete (its manifest comes last), so a resume takes the one before.
// Call first thing in main, as OnTerminationSignal.
void LeaveOnTerminationSignal(const char* role);

// Hands the session to the stop signal's answer for as long as it lives. Declare it after the
// session: its end, which waits for an answer under way, comes before the session's, so a
// signal in the process's last moments never reaches a session that is gone.
class LeavingOnSignal {
 public:
  explicit LeavingOnSignal(MemberSession* session);
  ~LeavingOnSignal();
  LeavingOnSignal(const LeavingOnSignal&) = delete;
  LeavingOnSignal& operator=(const LeavingOnSignal&) = delete;
};

// Returns when no stop signal has come within `wait`; once LeaveOnTerminationSignal answers
// one, never (that answer exits with 128 + signo). A container engine stops a pod's processes
// one by one: a worker whose shards were stopped first fails before its own signal comes, and
// that failure is the stop's doing, not the worker's. main calls this once it has left with a
// failure, before exiting as a failure.
void YieldToStopSignal(absl::Duration wait);

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_
