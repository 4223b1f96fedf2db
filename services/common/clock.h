#ifndef COHORT_SERVICES_COMMON_CLOCK_H_
#define COHORT_SERVICES_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cohort {

// Time as the services' cores see it, injected so tests can move it by hand. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_CLOCK_H_
