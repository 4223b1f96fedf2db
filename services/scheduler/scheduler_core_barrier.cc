// SchedulerCore's barriers: every worker of the generation meets, the callers waiting held as
// callbacks, released together at the last arrival, the job's end or a new generation.

#include "services/scheduler/scheduler_core.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "services/membership/job_membership.h"

namespace cohort {

absl::StatusOr<uint64_t> SchedulerCore::Barrier(int rank, const std::string& name,
                                                uint64_t fingerprint, int64_t generation) {
  absl::Notification released;
  absl::StatusOr<uint64_t> result;
  BarrierAsync(rank, name, fingerprint, generation, "", [&](absl::StatusOr<BarrierPassed> r) {
    result = r.ok() ? absl::StatusOr<uint64_t>(r->fingerprint) : r.status();
    released.Notify();
  });
  released.WaitForNotification();
  return result;
}

void SchedulerCore::BarrierAsync(int rank, const std::string& name, uint64_t fingerprint,
                                 int64_t generation, std::string payload, BarrierDone done,
                                 absl::Span<const Arrival> host_arrivals) {
  absl::MutexLock lock(&mu_);
  if (Find(MemberRole::kWorker, rank) == nullptr) {
    return done(absl::FailedPreconditionError(
        absl::StrCat("barrier '", name, "' from worker ", rank, ", which has not registered")));
  }
  if (Ended()) return done(absl::AbortedError(reason_));
  if (generation != generation_) return done(MembershipChangedError(generation_, generation_why_));
  // Every arrival is checked before any is counted: each another worker of the caller's host
  // group, once.
  absl::flat_hash_set<int> brought;
  for (const Arrival& a : host_arrivals) {
    if (a.rank == rank || Find(MemberRole::kWorker, a.rank) == nullptr) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "barrier '", name, "' from worker ", rank, " for worker ", a.rank,
          ", which is not another registered worker")));
    }
    if (absl::Status active = CheckActive(a.rank, a.name); !active.ok()) return done(active);
    if (GroupsByHost()->at(a.rank).leader != rank || !brought.insert(a.rank).second) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "barrier '", name, "' from worker ", rank, " for worker ", a.rank,
          ", which is not a worker of the host it leads or was brought twice")));
    }
  }
  if (absl::Status active = CheckActive(rank, name); !active.ok()) return done(active);
  ++barrier_calls_;
  barrier_arrivals_ += 1 + static_cast<int64_t>(host_arrivals.size());
  if (barrier_arrived_ == 0) {
    barrier_name_ = name;
    barrier_started_ = clock_->Now();
    barrier_payloads_.assign(active_.size(), std::string());
    barrier_payload_bytes_ = 0;
  }
  // The host's arrivals count before the caller's own, which completes the barrier.
  for (const Arrival& a : host_arrivals) {
    if (absl::Status arrived = Arrive(a.rank, a.name, a.fingerprint); !arrived.ok()) {
      return done(arrived);
    }
  }
  if (absl::Status arrived = Arrive(rank, name, fingerprint); !arrived.ok()) return done(arrived);
  barrier_payload_bytes_ += payload.size();
  if (barrier_payload_bytes_ > kMaxExchangeBytes) {
    Fail(absl::StrCat(Describe(MemberRole::kWorker, rank), " brought ", payload.size(),
                      " bytes to '", name, "', past the ", kMaxExchangeBytes >> 20,
                      " MiB the workers may bring to one exchange together: allreduce, "
                      "allgather and broadcast there are for small tensors and objects; send "
                      "parameters and gradients through the kvstore"));
    return done(absl::AbortedError(reason_));
  }
  const auto place = std::lower_bound(active_.begin(), active_.end(), rank);
  barrier_payloads_[place - active_.begin()] = std::move(payload);
  barrier_waiters_.push_back(std::move(done));
  if (barrier_arrived_ < static_cast<int>(active_.size())) return;
  barrier_arrived_ = 0;
  barrier_waits_.push_back(clock_->Now() - barrier_started_);
  ReleaseBarrier(BarrierPassed{
      fingerprint_, std::make_shared<const std::vector<std::string>>(std::move(barrier_payloads_))});
}

absl::Status SchedulerCore::CheckActive(int rank, const std::string& name) const {
  if (Active(rank)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "barrier '", name, "' from ", Describe(MemberRole::kWorker, rank),
      ", which is not one of the job's workers any more (taken for dead: no heartbeat in "
      "time)"));
}

absl::Status SchedulerCore::Arrive(int rank, const std::string& name, uint64_t fingerprint) {
  if (name != barrier_name_) {
    Fail(absl::StrCat(Describe(MemberRole::kWorker, rank), " reached barrier '", name,
                      "' while the others wait at '", barrier_name_,
                      "': the workers run different programs"));
    return absl::AbortedError(reason_);
  }
  if (fingerprint != 0) {
    if (fingerprint_rank_ < 0) {
      fingerprint_ = fingerprint;
      fingerprint_rank_ = rank;
    } else if (fingerprint != fingerprint_) {
      Fail(absl::StrFormat(
          "%s computed partition map %016x, but worker %d computed %016x: the workers build "
          "different models or pass different --part_bytes",
          Describe(MemberRole::kWorker, rank), fingerprint, fingerprint_rank_, fingerprint_));
      return absl::AbortedError(reason_);
    }
  }
  ++barrier_arrived_;
  return absl::OkStatus();
}

std::optional<HostGroup> SchedulerCore::MeetOnHostFirst(int rank, int64_t generation,
                                                        size_t host_arrivals) {
  absl::MutexLock lock(&mu_);
  if (Ended() || generation != generation_ || !Active(rank)) return std::nullopt;
  const HostGroup& group = GroupsByHost()->at(rank);
  if (group.workers < 2 || (group.leader == rank && host_arrivals + 1 == size_t(group.workers))) {
    return std::nullopt;
  }
  return group;
}

void SchedulerCore::ReleaseBarrier(const absl::StatusOr<BarrierPassed>& result) {
  std::vector<BarrierDone> waiters;
  waiters.swap(barrier_waiters_);
  barrier_payloads_.clear();
  for (BarrierDone& w : waiters) w(result);
}

}  // namespace cohort
