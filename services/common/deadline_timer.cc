#include "services/common/deadline_timer.h"

#include <algorithm>

namespace cohort {

DeadlineTimer::DeadlineTimer(std::function<void()> fire)
    : fire_(std::move(fire)), thread_([this] { Run(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void DeadlineTimer::FireBy(absl::Time when) {
  absl::MutexLock lock(&mu_);
  next_ = std::min(next_, when);
}

void DeadlineTimer::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const auto requested = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || next_ != absl::InfiniteFuture();
      };
      mu_.Await(absl::Condition(&requested));
      // An earlier request may come while this one waits: the wait starts over with it.
      while (!stopping_ && absl::Now() < next_) {
        const absl::Time deadline = next_;
        const auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || next_ < deadline;
        };
        mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
      }
      if (stopping_) return;
      next_ = absl::InfiniteFuture();
    }
    fire_();
  }
}

}  // namespace cohort
