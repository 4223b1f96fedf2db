#ifndef COHORT_SERVICES_WIRE_PIN_COUNT_H_
#define COHORT_SERVICES_WIRE_PIN_COUNT_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

// Counts the borrowers of a buffer that is sent without copying (a gRPC slice aliasing it
// until the transport has written it): the owner waits for none before rewriting the buffer.
class PinCount {
 public:
  void Pin() {
    absl::MutexLock lock(&mu_);
    ++count_;
  }
  void Unpin() {
    absl::MutexLock lock(&mu_);
    --count_;
  }
  void WaitUnpinned() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&Zero, &count_));
  }
  // False if pins remain after timeout.
  bool WaitUnpinnedFor(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&Zero, &count_), timeout);
  }
  int count() const {
    absl::MutexLock lock(&mu_);
    return count_;
  }

 private:
  static bool Zero(int* count) { return *count == 0; }

  mutable absl::Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WIRE_PIN_COUNT_H_
