#ifndef COHORT_SERVICES_COMMON_FAKE_CLOCK_H_
#define COHORT_SERVICES_COMMON_FAKE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "services/common/clock.h"

namespace cohort {

// For tests: time that moves only when the test says. Thread-safe.
class FakeClock final : public Clock {
 public:
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch() + absl::Hours(1000);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_FAKE_CLOCK_H_
