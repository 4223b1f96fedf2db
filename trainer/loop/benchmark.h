#ifndef COHORT_TRAINER_LOOP_BENCHMARK_H_
#define COHORT_TRAINER_LOOP_BENCHMARK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/ops/cpu/onednn_backend.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

struct BenchmarkCase {
  std::string model;
  Shape sample_shape;  // (C, H, W)
  int num_classes = 10;
  int64_t batch = 64;
  int warmup_steps = 2;  // untimed: primitive creation, first-touch of buffers
  int steps = 10;
  ActivationLayout layout = ActivationLayout::kBlocked;  // how the CPU backend holds activations
};

struct BenchmarkResult {
  double images_per_second = 0;
  double step_ms = 0;
  // Share of the step spent outside oneDNN primitives: loss, optimizer and kvstore copies, the
  // backend's own loops, the model's bookkeeping.
  double framework_overhead = 0;
  // The most bytes of host tensors the case held at once beyond what was in use before it (the
  // model, its step's tensors, the batch; the CPU allocator's count).
  int64_t peak_bytes = 0;
};

// Times full CPU training steps (StepRunner: forward, loss, backward, push and pull through the
// local kvstore running SGD with momentum) of a model on synthetic random data already in
// memory, so the figure leaves out data loading.
absl::StatusOr<BenchmarkResult> RunTrainingBenchmark(const BenchmarkCase& c);

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_BENCHMARK_H_
