// SchedulerCore's barriers: who may arrive (the generation's workers, a host's leader for its
// host), checked before the round in progress (BarrierRound) counts them.

#include "services/scheduler/scheduler_core.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
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
  if (roster_.Find(MemberRole::kWorker, rank) == nullptr) {
    return done(absl::FailedPreconditionError(
        absl::StrCat("barrier '", name, "' from worker ", rank, ", which has not registered")));
  }
  if (Ended()) return done(absl::AbortedError(reason_));
  if (generation != generation_) return done(MembershipChangedError(generation_, generation_why_));
  // Every arrival is checked before any is counted: each another worker of the caller's host
  // group, once.
  absl::flat_hash_set<int> brought;
  for (const Arrival& a : host_arrivals) {
    if (a.rank == rank || roster_.Find(MemberRole::kWorker, a.rank) == nullptr) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "barrier '", name, "' from worker ", rank, " for worker ", a.rank,
          ", which is not another registered worker")));
    }
    if (absl::Status active = CheckActive(a.rank, a.name); !active.ok()) return done(active);
    if (roster_.GroupsByHost(active_)->at(a.rank).leader != rank || !brought.insert(a.rank).second) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "barrier '", name, "' from worker ", rank, " for worker ", a.rank,
          ", which is not a worker of the host it leads or was brought twice")));
    }
  }
  if (absl::Status active = CheckActive(rank, name); !active.ok()) return done(active);
  barrier_.Count(1 + host_arrivals.size());
  barrier_.OpenIfIdle(name, active_.size(), clock_->Now());
  // The host's arrivals count before the caller's own, which completes the barrier.
  for (const Arrival& a : host_arrivals) {
    if (absl::Status arrived = Arrive(a.rank, a.name, a.fingerprint); !arrived.ok()) {
      return done(arrived);
    }
  }
  if (absl::Status arrived = Arrive(rank, name, fingerprint); !arrived.ok()) return done(arrived);
  const auto place = std::lower_bound(active_.begin(), active_.end(), rank);
  if (absl::Status brought = barrier_.Bring(place - active_.begin(), std::move(payload),
                                            roster_.Describe(MemberRole::kWorker, rank));
      !brought.ok()) {
    Fail(std::string(brought.message()));
    return done(absl::AbortedError(reason_));
  }
  barrier_.Wait(std::move(done));
  barrier_.ReleaseIfComplete(active_.size(), clock_->Now());
}

absl::Status SchedulerCore::CheckActive(int rank, const std::string& name) const {
  if (Active(rank)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "barrier '", name, "' from ", roster_.Describe(MemberRole::kWorker, rank),
      ", which is not one of the job's workers any more (taken for dead: no heartbeat in "
      "time)"));
}

absl::Status SchedulerCore::Arrive(int rank, const std::string& name, uint64_t fingerprint) {
  absl::Status arrived =
      barrier_.Arrive(rank, name, fingerprint, roster_.Describe(MemberRole::kWorker, rank));
  if (arrived.ok()) return arrived;
  Fail(std::string(arrived.message()));
  return absl::AbortedError(reason_);
}

std::optional<HostGroup> SchedulerCore::MeetOnHostFirst(int rank, int64_t generation,
                                                        size_t host_arrivals) {
  absl::MutexLock lock(&mu_);
  if (Ended() || generation != generation_ || !Active(rank)) return std::nullopt;
  const HostGroup& group = roster_.GroupsByHost(active_)->at(rank);
  if (group.workers < 2 || (group.leader == rank && host_arrivals + 1 == size_t(group.workers))) {
    return std::nullopt;
  }
  return group;
}

}  // namespace cohort
