#include "services/scheduler/barrier_round.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort {

void BarrierRound::OpenIfIdle(const std::string& name, size_t workers, absl::Time now) {
  if (arrived_ > 0) return;
  name_ = name;
  started_ = now;
  payloads_.assign(workers, std::string());
  payload_bytes_ = 0;
}

absl::Status BarrierRound::Arrive(int rank, const std::string& name, uint64_t fingerprint,
                                  const std::string& who) {
  if (name != name_) {
    return absl::FailedPreconditionError(absl::StrCat(who, " reached barrier '", name,
                                                      "' while the others wait at '", name_,
                                                      "': the workers run different programs"));
  }
  if (fingerprint != 0) {
    if (fingerprint_rank_ < 0) {
      fingerprint_ = fingerprint;
      fingerprint_rank_ = rank;
    } else if (fingerprint != fingerprint_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s computed partition map %016x, but worker %d computed %016x: the workers build "
          "different models or pass different --part_bytes",
          who, fingerprint, fingerprint_rank_, fingerprint_));
    }
  }
  ++arrived_;
  return absl::OkStatus();
}

absl::Status BarrierRound::Bring(size_t slot, std::string payload, const std::string& who) {
  payload_bytes_ += payload.size();
  if (payload_bytes_ > kMaxExchangeBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        who, " brought ", payload.size(), " bytes to '", name_, "', past the ",
        kMaxExchangeBytes >> 20,
        " MiB the workers may bring to one exchange together: allreduce, allgather and "
        "broadcast there are for small tensors and objects; send parameters and gradients "
        "through the kvstore"));
  }
  payloads_[slot] = std::move(payload);
  return absl::OkStatus();
}

bool BarrierRound::ReleaseIfComplete(size_t workers, absl::Time now) {
  if (arrived_ < static_cast<int>(workers)) return false;
  arrived_ = 0;
  waits_.push_back(now - started_);
  Release(BarrierPassed{fingerprint_,
                        std::make_shared<const std::vector<std::string>>(std::move(payloads_))});
  return true;
}

void BarrierRound::Abandon(const absl::Status& why) {
  arrived_ = 0;
  name_.clear();
  Release(why);
}

void BarrierRound::Release(const absl::StatusOr<BarrierPassed>& result) {
  std::vector<Done> waiters;
  waiters.swap(waiters_);
  payloads_.clear();
  for (Done& w : waiters) w(result);
}

std::vector<absl::Duration> BarrierRound::TakeWaits() {
  std::vector<absl::Duration> waits;
  waits.swap(waits_);
  return waits;
}

}  // namespace cohort
