#include "trainer/loop/devices.h"

#include <omp.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "trainer/base/status_macros.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

constexpr int kMaxCpuContexts = 64;

GpuBackendFactory& GpuFactory() {
  static GpuBackendFactory* const factory = new GpuBackendFactory();
  return *factory;
}

// What follows "gpu:" (or the whole value, as --gpus gives it): distinct GPU indices in the
// order their replicas take (replica 0 is evaluated and exported).
absl::StatusOr<std::vector<int>> ParseGpuIndices(const std::string& devices,
                                                 absl::string_view list) {
  std::vector<int> indices;
  for (absl::string_view word : absl::StrSplit(list, ',')) {
    int index = 0;
    if (!absl::SimpleAtoi(word, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices=", devices, ": expected gpu:I or gpu:I,J,... with GPU indices (0, 1, ...)"));
    }
    if (std::find(indices.begin(), indices.end(), index) != indices.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--devices=", devices, ": GPU ", index, " is named twice; one replica per GPU"));
    }
    indices.push_back(index);
  }
  return indices;
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeGpuBackends(
    const std::string& devices, absl::string_view list, const DeviceOptions& options) {
  ASSIGN_OR_RETURN(const std::vector<int> indices, ParseGpuIndices(devices, list));
  if (!GpuFactory()) {
    return absl::UnimplementedError(absl::StrCat(
        "--devices=", devices, ": this binary is built without the GPU backend; run its GPU "
        "build (//trainer:train_gpu for the trainer, //services:worker_gpu for a job's workers, "
        "which the launcher picks from --devices), or --devices=cpu"));
  }
  std::vector<std::unique_ptr<Backend>> backends;
  for (const int index : indices) {
    ASSIGN_OR_RETURN(backends.emplace_back(), GpuFactory()(index, options));
  }
  return backends;
}

}  // namespace

int ProcessComputeThreads() { return omp_get_max_threads(); }

bool RegisterGpuBackendFactory(GpuBackendFactory factory) {
  GpuFactory() = std::move(factory);
  return true;
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeDeviceBackends(
    const std::string& devices, const DeviceOptions& options) {
  if (devices == "gpu") return MakeGpuBackends(devices, "0", options);
  if (absl::StartsWith(devices, "gpu:")) {
    return MakeGpuBackends(devices, absl::string_view(devices).substr(4), options);
  }
  if (!devices.empty() && absl::ascii_isdigit(devices[0])) {
    return MakeGpuBackends(devices, devices, options);  // --gpus 0,1
  }
  if (options.precision != Precision::kFp32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision=", PrecisionName(options.precision),
        " needs a GPU (--devices=gpu:0); CPUs train in fp32"));
  }
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
    const int threads = ProcessComputeThreads();
    for (int i = 0; i < n; ++i) {
      backends.push_back(std::make_unique<OnednnBackend>(std::max(1, threads / n)));
    }
    return backends;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--devices=", devices, ": expected cpu, cpu:N, gpu:I or gpu:I,J,..."));
}

}  // namespace cohort
