#ifndef COHORT_SERVICES_SCHEDULER_JOB_HISTORY_H_
#define COHORT_SERVICES_SCHEDULER_JOB_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "services/scheduler/job_status.h"

namespace cohort {

// What the job page plots and lists: the job's progress over time, and what happened to it
// (its state, members joining, dying, stopping and coming back, generations), found by
// comparing each /status snapshot with the one before. The scheduler records one a second.
// Memory is bounded: past max_samples the samples are thinned to every other one (and then
// recorded half as often), and only the latest max_events events are kept. Thread-safe.
class JobHistory {
 public:
  explicit JobHistory(size_t max_samples = 1800, size_t max_events = 500);

  // status.seconds_since_start is the snapshot's time.
  void Record(const JobStatus& status);

  // {"samples":[{"t":s,"step":n,"images_per_second":x,"loss":x,"comm":x,"test_top1":x|null,
  //   "workers":n},...], "events":[{"t":s,"text":"..."},...], "events_dropped":n}
  std::string Json() const;

 private:
  struct Sample {
    double t;
    JobProgress progress;
  };
  struct Event {
    double t;
    std::string text;
  };
  void Add(double t, std::string text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompareWithPrevious(const JobStatus& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_samples_;
  const size_t max_events_;
  mutable absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
  int64_t stride_ ABSL_GUARDED_BY(mu_) = 1;  // record every stride-th snapshot's sample
  int64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  int64_t events_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<JobStatus> previous_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_JOB_HISTORY_H_
