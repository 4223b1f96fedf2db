#ifndef COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_
#define COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_

#include <atomic>

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

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_LEAVE_ON_SIGNAL_H_
