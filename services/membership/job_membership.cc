#include "services/membership/job_membership.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/addresses.h"

namespace cohort {
namespace {

constexpr absl::string_view kGenerationPayload = "cohort/membership-generation";
constexpr absl::string_view kLostShardPayload = "cohort/lost-shard";

// A number a status carries under `url`.
void SetNumber(absl::Status* status, absl::string_view url, int64_t number) {
  status->SetPayload(url, absl::Cord(absl::StrCat(number)));
}
std::optional<int64_t> Number(const absl::Status& status, absl::string_view url) {
  const auto payload = status.GetPayload(url);  // absl::optional<absl::Cord>
  int64_t number = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &number)) {
    return std::nullopt;
  }
  return number;
}

}  // namespace

absl::Status MembershipChangedError(int64_t generation, absl::string_view why) {
  absl::Status s = absl::AbortedError(
      absl::StrCat("the job's workers changed (generation ", generation, "): ", why));
  SetNumber(&s, kGenerationPayload, generation);
  return s;
}

std::optional<int64_t> ChangedGeneration(const absl::Status& status) {
  return Number(status, kGenerationPayload);
}

absl::Status WithLostShard(absl::Status failure, int shard) {
  SetNumber(&failure, kLostShardPayload, shard);
  return failure;
}

std::optional<int> LostShard(const absl::Status& status) {
  const std::optional<int64_t> shard = Number(status, kLostShardPayload);
  if (!shard.has_value()) return std::nullopt;
  return static_cast<int>(*shard);
}

int ShardsView::BackupOf(int shard) const {
  const int n = static_cast<int>(addresses.size());
  if (replicas < 2 || n < 2 || shard < 0 || shard >= n) return -1;
  const absl::string_view host = HostOfAddress(addresses[shard]);
  for (int i = 1; i < n; ++i) {
    const int next = (shard + i) % n;
    if (HostOfAddress(addresses[next]) != host) return next;
  }
  return (shard + 1) % n;
}

}  // namespace cohort
