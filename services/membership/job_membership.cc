#include "services/membership/job_membership.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

constexpr absl::string_view kGenerationPayload = "cohort/membership-generation";
constexpr absl::string_view kLostShardPayload = "cohort/lost-shard";

}  // namespace

absl::Status MembershipChangedError(int64_t generation, absl::string_view why) {
  absl::Status s = absl::AbortedError(
      absl::StrCat("the job's workers changed (generation ", generation, "): ", why));
  s.SetPayload(kGenerationPayload, absl::Cord(absl::StrCat(generation)));
  return s;
}

std::optional<int64_t> ChangedGeneration(const absl::Status& status) {
  const auto payload = status.GetPayload(kGenerationPayload);
  int64_t generation = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &generation)) {
    return std::nullopt;
  }
  return generation;
}

absl::Status WithLostShard(absl::Status failure, int shard) {
  failure.SetPayload(kLostShardPayload, absl::Cord(absl::StrCat(shard)));
  return failure;
}

std::optional<int> LostShard(const absl::Status& status) {
  const auto payload = status.GetPayload(kLostShardPayload);
  int shard = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &shard)) {
    return std::nullopt;
  }
  return shard;
}

}  // namespace cohort
