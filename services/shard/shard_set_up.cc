#include "services/shard/shard_set_up.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace cohort {

void ShardSetUp::Done() {
  absl::MutexLock lock(&mu_);
  done_ = true;
}

void ShardSetUp::Leave() {
  absl::MutexLock lock(&mu_);
  left_ = true;
}

absl::Status ShardSetUp::Wait(absl::string_view call) const {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(this, &ShardSetUp::Decided), absl::Minutes(5))) {
    return absl::UnavailableError(absl::StrCat("shard ", call,
                                               ": the shard has not finished loading its "
                                               "checkpoint in 5 minutes (see its log)"));
  }
  if (left_) return absl::CancelledError("the shard left the job");
  return absl::OkStatus();
}

}  // namespace cohort
