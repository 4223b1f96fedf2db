#ifndef COHORT_SERVICES_SHARD_SHARD_SET_UP_H_
#define COHORT_SERVICES_SHARD_SHARD_SET_UP_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

// The moment a shard is set up: its rank known and its checkpoint loaded. A shard registers
// (which needs its port, so it serves first) before it knows its rank, so calls that may come
// as soon as every member has joined (rank 0's Init and RollBack, a leader's replication) wait
// for it. Thread-safe.
class ShardSetUp {
 public:
  // The shard is set up: waiting calls go on.
  void Done() ABSL_LOCKS_EXCLUDED(mu_);
  // The shard leaves the job: waiting calls, and later ones, end at once.
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);
  // OK once set up; Cancelled once the shard left; Unavailable after 5 minutes, naming `call`.
  absl::Status Wait(absl::string_view call) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Decided() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ || left_; }

  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool left_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SHARD_SHARD_SET_UP_H_
