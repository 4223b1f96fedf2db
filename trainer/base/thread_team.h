#ifndef COHORT_TRAINER_BASE_THREAD_TEAM_H_
#define COHORT_TRAINER_BASE_THREAD_TEAM_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

// A fixed team of long-lived threads, one per member, for fork-join work: Run(fn) calls
// fn(member) on every member's thread and returns when all have returned. The threads live as
// long as the team, so per-thread state set up by setup(member) (an OpenMP thread count, later
// a CUDA device) survives from one Run to the next. Run is called from one thread at a time.
class ThreadTeam {
 public:
  ThreadTeam(int members, std::function<void(int member)> setup);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  void Run(const std::function<void(int member)>& fn);

 private:
  void Loop(int member, const std::function<void(int)>& setup);

  absl::Mutex mu_;
  const std::function<void(int)>* work_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // counts Runs; members wait for the next one
  int pending_ ABSL_GUARDED_BY(mu_) = 0;         // members still running the current work
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_BASE_THREAD_TEAM_H_
