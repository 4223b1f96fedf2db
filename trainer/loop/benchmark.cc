#include "trainer/loop/benchmark.h"

#include <chrono>

#include "trainer/base/random.h"
#include "trainer/base/status_macros.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"
#include "trainer/loop/step.h"

namespace cohort {

absl::StatusOr<BenchmarkResult> RunTrainingBenchmark(const BenchmarkCase& c) {
  const int64_t in_use_before = CpuAllocator()->memory_use().in_use;
  CpuAllocator()->ResetPeak();
  OnednnBackend backend(0, c.layout);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   BuildModel(c.model, &backend, c.sample_shape, c.num_classes));
  model->InitParameters(1);
  std::vector<int64_t> dims{c.batch};
  dims.insert(dims.end(), c.sample_shape.dims().begin(), c.sample_shape.dims().end());
  Tensor images{Shape(dims)};
  Tensor labels(Shape{c.batch}, DType::kI32);
  Rng rng(7);
  for (float& v : images.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(c.num_classes));
  SoftmaxCrossEntropyLoss loss(&backend);
  OptimizerSpec optimizer;  // SGD with momentum and weight decay at a constant rate
  optimizer.optimizer_options = {0.9, 1e-4};
  optimizer.lr_schedule.base_lr = 0.01;
  ASSIGN_OR_RETURN(std::unique_ptr<KVStore> kvstore, CreateKVStore("local"));
  RETURN_IF_ERROR(kvstore->SetOptimizer(optimizer));
  RETURN_IF_ERROR(InitKVStore(*model, kvstore.get()));
  StepRunner runner(model.get(), &loss, kvstore.get(), /*overlap=*/true);
  for (int i = 0; i < c.warmup_steps; ++i) RETURN_IF_ERROR(runner.Step(images, labels).status());
  const double primitive_before = backend.primitive_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < c.steps; ++i) RETURN_IF_ERROR(runner.Step(images, labels).status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double primitive = backend.primitive_seconds() - primitive_before;
  BenchmarkResult r;
  r.images_per_second = static_cast<double>(c.batch) * c.steps / seconds;
  r.step_ms = 1000.0 * seconds / c.steps;
  r.framework_overhead = 1.0 - primitive / seconds;
  r.peak_bytes = CpuAllocator()->memory_use().peak - in_use_before;
  return r;
}

}  // namespace cohort
