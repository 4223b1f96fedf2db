#ifndef COHORT_SERVICES_COMMON_CLOCK_H_
#define COHORT_SERVICES_COMMON_CLOCK_H_

#include <chrono>

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

// A monotonic instant as an absl::Time (its epoch is the boot, not 1970): for deadlines that a
// step of the wall clock must neither cut short nor stretch.
inline absl::Time SteadyNow() {
  return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_CLOCK_H_
