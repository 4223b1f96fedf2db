#ifndef COHORT_TRAINER_LOOP_DEVICES_H_
#define COHORT_TRAINER_LOOP_DEVICES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/ops/op.h"
#include "trainer/ops/precision.h"

namespace cohort {

// One backend per device context a --devices value names:
//  - "cpu" (or "cpu:1"): one context on every core;
//  - "cpu:N": N contexts, each running on a thread of its own with its share of the process's
//    OpenMP threads (at least one), so a worker splits its local batch over them;
//  - "gpu:I" (or "gpu", GPU 0): GPU I, computing in `precision`; "gpu:I,J,..." one context per
//    GPU named, in that order, so a worker splits its local batch over them; a bare "I,J,..."
//    is the same (what --gpus I,J gives, as MXNet's). Only in binaries built with the GPU
//    backend (//trainer:train_gpu, //services:worker_gpu), which register it.
// CPUs compute in fp32 only.
struct DeviceOptions {
  Precision precision = Precision::kFp32;
  // GPUs: only convolution algorithms that give the same bits every run.
  bool deterministic = false;
};
absl::StatusOr<std::vector<std::unique_ptr<Backend>>> MakeDeviceBackends(
    const std::string& devices, const DeviceOptions& options = {});

// The compute threads this process's CPU contexts share: OpenMP's (every core, or the
// launcher's OMP_NUM_THREADS share).
int ProcessComputeThreads();

// Makes the backend of GPU `index`. Registered by //trainer/gpu:gpu_devices when it is linked
// in, so CPU builds carry no CUDA library; returns true (for a static initialiser).
using GpuBackendFactory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(
    int index, const DeviceOptions& options)>;
bool RegisterGpuBackendFactory(GpuBackendFactory factory);

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_DEVICES_H_
