#include "trainer/devices.h"

#include <omp.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

constexpr int kMaxCpuContexts = 64;

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeDeviceBackends(
    const std::string& devices) {
  std::vector<std::unique_ptr<Backend>> backends;
  if (devices == "cpu") {
    backends.push_back(std::make_unique<OnednnBackend>());
    return backends;
  }
  if (absl::StartsWith(devices, "cpu:")) {
    int n = 0;
    if (!absl::SimpleAtoi(devices.substr(4), &n) || n < 1 || n > kMaxCpuContexts) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices=", devices, ": expected cpu:N with N from 1 to ", kMaxCpuContexts));
    }
    if (n == 1) return MakeDeviceBackends("cpu");
    // The process's OpenMP threads (every core, or the launcher's OMP_NUM_THREADS share).
    const int threads = omp_get_max_threads();
    for (int i = 0; i < n; ++i) {
      backends.push_back(std::make_unique<OnednnBackend>(std::max(1, threads / n)));
    }
    return backends;
  }
  if (absl::StartsWith(devices, "gpu")) {
    return absl::UnimplementedError(absl::StrCat(
        "--devices=", devices, ": this trainer has no GPU backend yet; use --devices=cpu"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--devices=", devices, ": expected cpu, cpu:N or gpu:I[,J...]"));
}

}  // namespace cohort
