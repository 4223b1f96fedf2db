#include "services/membership/job_membership.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

constexpr absl::string_view kGenerationPayload = "cohort/membership-generation";

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

}  // namespace cohort
