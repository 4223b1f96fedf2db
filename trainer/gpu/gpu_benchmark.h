#ifndef COHORT_TRAINER_GPU_GPU_BENCHMARK_H_
#define COHORT_TRAINER_GPU_GPU_BENCHMARK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/ops/cuda/cuda_backend.h"

namespace cohort::cuda {

struct GpuBenchmarkCase {
  std::string model = "resnet50";
  int64_t batch = 128;
  CudaBackendOptions backend;
  int warmup_steps = 5;  // untimed: cudnnFind, buffer sizing, the first allocations
  int steps = 30;
  // Waits for each step's loss on the host, as the trainer does for its progress line and phase
  // times; otherwise (as PyTorch's loop) only the first and last steps' are read.
  bool read_loss_every_step = false;
  // The timed steps launched from a CUDA graph of one step (StepGraph), captured after the
  // warm-up: the launch overhead gone. Not with loss scaling (fp16), whose check waits for
  // the GPU, nor read_loss_every_step.
  bool cuda_graph = false;
};

struct GpuBenchmarkResult {
  double images_per_second = 0;
  double step_ms = 0;
  double memory_gib = 0;  // device memory the caching allocator holds (in use or cached)
  // The most device memory in use at once: what torch.cuda.max_memory_allocated reads.
  double peak_gib = 0;
  double first_loss = 0;  // the first warm-up step's
  double last_loss = 0;   // the last timed step's: training on one batch, it falls
};

// Times full training steps of a model on one GPU: forward, loss, backward and the SGD update
// with momentum (fp32 master weights; fp16 with loss scaling), on one synthetic batch already
// on the device (ImageNet-shaped for ResNet-50, CIFAR-shaped for the CIFAR ResNets), so the
// figure is the GPU's training speed, as PyTorch's synthetic benchmarks measure it.
absl::StatusOr<GpuBenchmarkResult> RunGpuBenchmark(const GpuBenchmarkCase& c);

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_GPU_GPU_BENCHMARK_H_
