#include "trainer/base/thread_team.h"

namespace cohort {

ThreadTeam::ThreadTeam(int members, std::function<void(int)> setup) {
  for (int m = 0; m < members; ++m) {
    threads_.emplace_back([this, m, setup] { Loop(m, setup); });
  }
}

ThreadTeam::~ThreadTeam() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadTeam::Run(const std::function<void(int)>& fn) {
  absl::MutexLock lock(&mu_);
  work_ = &fn;
  pending_ = size();
  ++generation_;
  const auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; };
  mu_.Await(absl::Condition(&all_done));
  work_ = nullptr;
}

void ThreadTeam::Loop(int member, const std::function<void(int)>& setup) {
  if (setup) setup(member);
  int64_t done = 0;  // the last generation this member ran
  while (true) {
    const std::function<void(int)>* work;
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || generation_ != done;
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      done = generation_;
      work = work_;
    }
    (*work)(member);
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

}  // namespace cohort
