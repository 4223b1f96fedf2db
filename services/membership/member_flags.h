#ifndef COHORT_SERVICES_MEMBERSHIP_MEMBER_FLAGS_H_
#define COHORT_SERVICES_MEMBERSHIP_MEMBER_FLAGS_H_

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/time/time.h"

// How a member (shard, worker) waits for its scheduler. The role's <binary>_main.cc expands
// COHORT_DEFINE_MEMBER_FLAGS() at file scope, so its --help lists them. The first wait is long:
// on a cluster a member's pod may start minutes before the scheduler's (its node pulling the
// image).
#define COHORT_DEFINE_MEMBER_FLAGS()                                                             \
  ABSL_FLAG(double, connect_timeout, 300,                                                        \
            "seconds to wait for the scheduler to answer at first (it may start later)");        \
  ABSL_FLAG(double, scheduler_grace, 3.0,                                                        \
            "seconds to wait for a lost scheduler to answer again before exiting")

ABSL_DECLARE_FLAG(double, connect_timeout);
ABSL_DECLARE_FLAG(double, scheduler_grace);

namespace cohort {

inline absl::Duration ConnectTimeoutFlag() {
  return absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
}
inline absl::Duration SchedulerGraceFlag() {
  return absl::Seconds(absl::GetFlag(FLAGS_scheduler_grace));
}

}  // namespace cohort

#endif  // COHORT_SERVICES_MEMBERSHIP_MEMBER_FLAGS_H_
