#ifndef COHORT_SERVICES_SCHEDULER_BARRIER_ROUND_H_
#define COHORT_SERVICES_SCHEDULER_BARRIER_ROUND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cohort {

// What passing a barrier gives each worker: the fingerprint agreed on, and the bytes every
// worker brought to it, by rank in the generation (an exchange: the collectives of a Python
// worker's allreduce, allgather and broadcast of small tensors and objects).
struct BarrierPassed {
  uint64_t fingerprint = 0;
  std::shared_ptr<const std::vector<std::string>> payloads;
};

// The barrier in progress among a generation's workers: its name, the arrivals with their
// partition maps (the first non-zero fingerprint is the one every later one must equal), what
// the workers bring, and the callers waiting, released together; for the metrics, how long
// each round waited and how many calls and arrivals came. A wrong arrival (at another barrier,
// with another partition map) or too many bytes brought is the job's failure: the error says
// why, in words for the job's reason. gRPC-free and lock-free: the scheduler core owns it and
// calls it under its lock.
class BarrierRound {
 public:
  using Done = std::function<void(absl::StatusOr<BarrierPassed>)>;
  // The most bytes the workers together bring to one barrier (its answer is one message).
  static constexpr size_t kMaxExchangeBytes = 12 << 20;

  // A call bringing `arrivals` arrivals (its worker's and those of its host it brings).
  void Count(size_t arrivals) {
    ++calls_;
    arrivals_ += static_cast<int64_t>(arrivals);
  }
  // Opens barrier `name` for `workers` workers at `now`, unless one is in progress.
  void OpenIfIdle(const std::string& name, size_t workers, absl::Time now);
  // A worker's arrival; `who` names it in the failure.
  absl::Status Arrive(int rank, const std::string& name, uint64_t fingerprint,
                      const std::string& who);
  // What the worker in `slot` (its rank in the generation) brings; a failure past
  // kMaxExchangeBytes brought together.
  absl::Status Bring(size_t slot, std::string payload, const std::string& who);
  void Wait(Done done) { waiters_.push_back(std::move(done)); }
  // Once every one of `workers` arrived: the round closes, its wait counted to `now`, and
  // every waiter passes. Returns whether it did.
  bool ReleaseIfComplete(size_t workers, absl::Time now);
  // The round ends unpassed (a new generation, the job's end): every waiter gets `why`, and
  // the next arrival opens a new round.
  void Abandon(const absl::Status& why);

  // The waits of the rounds passed since the last call.
  std::vector<absl::Duration> TakeWaits();
  int64_t calls() const { return calls_; }
  int64_t arrivals() const { return arrivals_; }

 private:
  void Release(const absl::StatusOr<BarrierPassed>& result);

  std::string name_;
  int arrived_ = 0;
  absl::Time started_;  // the first arrival
  // By rank in the generation, what each worker brought, and their bytes together.
  std::vector<std::string> payloads_;
  size_t payload_bytes_ = 0;
  std::vector<Done> waiters_;
  uint64_t fingerprint_ = 0;
  int fingerprint_rank_ = -1;
  std::vector<absl::Duration> waits_;  // not yet taken
  int64_t calls_ = 0;
  int64_t arrivals_ = 0;
};

}  // namespace cohort

#endif  // COHORT_SERVICES_SCHEDULER_BARRIER_ROUND_H_
