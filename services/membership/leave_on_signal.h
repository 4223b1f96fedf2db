#ifndef COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_
#define COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_

#include <atomic>

#include "absl/time/time.h"
#include "services/membership/member_session.h"

namespace cohort {

// A shard's or worker's answer to SIGTERM/SIGINT (a container engine, Kubernetes, scancel):
// once `*member` is set (the process joined its job), it leaves saying so ("stopped by
// SIGTERM": the scheduler fails the job naming it, waits for a restartable shard, or an
// elastic job goes on without a worker), waiting at most a second for the scheduler; then the
// process exits at once with 128 + signo. Streams are not drained: a checkpoint being written
// stays incomplete (its manifest comes last), so a resume takes the one before.
// Call first thing in main, as OnTerminationSignal; `member` must outlive the process.
void LeaveOnTerminationSignal(const char* role, const std::atomic<MemberSession*>* member);

// Returns when no stop signal has come within `wait`; once LeaveOnTerminationSignal answers
// one, never (that answer exits with 128 + signo). A container engine stops a pod's processes
// one by one: a worker whose shards were stopped first fails before its own signal comes, and
// that failure is the stop's doing, not the worker's. main calls this once it has left with a
// failure, before exiting as a failure.
void YieldToStopSignal(absl::Duration wait);

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_
