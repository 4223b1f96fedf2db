#include "trainer/loop/devices.h"

#include <omp.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"
#include "trainer/ops/cpu/onednn_backend.h"

namespace cohort {
namespace {

constexpr int kMaxCpuContexts = 64;

GpuBackendFactory& GpuFactory() {
  static GpuBackendFactory* const factory = new GpuBackendFactory();
  return *factory;
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeGpuBackends(const std::string& devices,
                                                                      Precision precision) {
  const std::string list = devices == "gpu" ? "0" : devices.substr(4);
  int index = 0;
  if (!absl::SimpleAtoi(list, &index) || index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices=", devices, ": expected gpu:I, one GPU per process (run one worker per GPU)"));
  }
  if (!GpuFactory()) {
    return absl::UnimplementedError(absl::StrCat(
        "--devices=", devices, ": this binary is built without the GPU backend; use "
        "//trainer:train_gpu, or --devices=cpu"));
  }
  std::vector<std::unique_ptr<Backend>> backends;
  ASSIGN_OR_RETURN(backends.emplace_back(), GpuFactory()(index, precision));
  return backends;
}

}  // namespace

int ProcessComputeThreads() { return omp_get_max_threads(); }

bool RegisterGpuBackendFactory(GpuBackendFactory factory) {
  GpuFactory() = std::move(factory);
  return true;
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeDeviceBackends(
    const std::string& devices, Precision precision) {
  if (devices == "gpu" || absl::StartsWith(devices, "gpu:")) {
    return MakeGpuBackends(devices, precision);
  }
  if (precision != Precision::kFp32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision=", PrecisionName(precision), " needs a GPU (--devices=gpu:0); CPUs train "
        "in fp32"));
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
      absl::StrCat("--devices=", devices, ": expected cpu, cpu:N or gpu:I"));
}

}  // namespace cohort
