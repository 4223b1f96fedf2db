#ifndef COHORT_SERVICES_COMMON_DEADLINE_TIMER_H_
#define COHORT_SERVICES_COMMON_DEADLINE_TIMER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cohort {

// Calls `fire` on a thread of its own once the earliest time asked for (FireBy) has come, then
// waits for the next request. Requests made while a call runs count for the next one. Stops
// (after a call in progress) when destroyed.
class DeadlineTimer {
 public:
  explicit DeadlineTimer(std::function<void()> fire);
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // fire runs at `when` at the latest (sooner if an earlier request is pending).
  void FireBy(absl::Time when);

 private:
  void Run();

  const std::function<void()> fire_;
  absl::Mutex mu_;
  absl::Time next_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is set up
};

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_DEADLINE_TIMER_H_
