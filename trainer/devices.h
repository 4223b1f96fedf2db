#ifndef COHORT_TRAINER_DEVICES_H_
#define COHORT_TRAINER_DEVICES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/ops/op.h"

namespace cohort {

// One backend per device context a --devices value names:
//  - "cpu" (or "cpu:1"): one context on every core;
//  - "cpu:N": N contexts, each running on a thread of its own with its share of the process's
//    OpenMP threads (at least one), so a worker splits its local batch over them.
// GPUs ("gpu:0,1") are refused until a GPU backend exists.
absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeDeviceBackends(
    const std::string& devices);

}  // namespace cohort

#endif  // COHORT_TRAINER_DEVICES_H_
