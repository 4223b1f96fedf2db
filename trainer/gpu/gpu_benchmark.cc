#include "trainer/gpu/gpu_benchmark.h"

#include <chrono>

#include "absl/strings/str_format.h"

#include <cuda_profiler_api.h>

#include "trainer/base/random.h"
#include "trainer/base/status_macros.h"
#include "trainer/gpu/device_sgd.h"
#include "trainer/gpu/step_graph.h"
#include "trainer/models/models.h"
#include "trainer/nn/loss.h"

namespace cohort::cuda {

absl::StatusOr<GpuBenchmarkResult> RunGpuBenchmark(const GpuBenchmarkCase& c) {
  if (c.warmup_steps < 1 || c.steps < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d warm-up and %d timed steps: both must be at least 1 (the first step runs cudnnFind)",
        c.warmup_steps, c.steps));
  }
  if (c.cuda_graph && (c.backend.precision == Precision::kFp16 || c.read_loss_every_step)) {
    return absl::InvalidArgumentError(
        "a CUDA graph replays a step that never waits for the GPU: not with fp16's loss "
        "scaling nor with the loss read every step");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> gpu, CudaBackend::Create(c.backend));
  const BenchmarkSample input = BenchmarkSampleFor(c.model);
  const Shape& sample = input.shape;
  const int classes = input.num_classes;
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, BuildModel(c.model, gpu.get(), sample, classes));
  model->InitParameters(1);
  SoftmaxCrossEntropyLoss loss(gpu.get());
  const bool fp16 = c.backend.precision == Precision::kFp16;
  DeviceSgd sgd(gpu.get(), model->parameters(), {0.9f, 1e-4f}, {fp16});

  Tensor host_images(Shape{c.batch, sample[0], sample[1], sample[2]});
  Tensor host_labels(Shape{c.batch}, DType::kI32);
  Rng rng(2);
  for (float& v : host_images.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int32_t& l : host_labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(classes));
  Tensor images(Shape{0}, gpu->dtype(), gpu->allocator());
  Tensor labels(Shape{0}, DType::kI32, gpu->allocator());
  const Tensor& x = gpu->ImportImages(host_images, &images);
  const Tensor& y = gpu->ImportLabels(host_labels, &labels);

  float scale = 1.0f;
  double step_loss = 0;
  auto step = [&](bool read_loss) {
    if (sgd.loss_scale() != scale) {  // setting it waits for the GPU: only when it changes
      scale = sgd.loss_scale();
      loss.set_gradient_scale(scale);
    }
    // Reading the loss waits for the GPU: the trainer's way reads it after the forward pass,
    // otherwise it is read once the whole step is queued.
    loss.Compute(model->Forward(Mode::kTrain, x), y);
    if (read_loss && c.read_loss_every_step) step_loss = loss.ReadLoss();
    model->Backward(loss.Backward());
    sgd.Step(0.01f);
    if (read_loss && !c.read_loss_every_step) step_loss = loss.ReadLoss();
  };
  GpuBenchmarkResult r;
  for (int i = 0; i < c.warmup_steps; ++i) {
    step(i == 0 || c.read_loss_every_step);
    if (i == 0) r.first_loss = step_loss;
  }
  StepGraph graph(gpu->context());
  if (c.cuda_graph) RETURN_IF_ERROR(graph.Run([&] { step(false); }));  // one more warm-up step
  gpu->context()->Synchronize();
  // Profilers started with profiling off (ncu --profile-from-start off) see the timed steps
  // alone, without the warm-up's cudnnFind trials.
  cudaProfilerStart();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < c.steps; ++i) {
    if (!c.cuda_graph) {
      step(i == c.steps - 1 || c.read_loss_every_step);
      continue;
    }
    RETURN_IF_ERROR(graph.Run([&] { step(false); }));
    if (i == c.steps - 1) step_loss = loss.ReadLoss();
  }
  gpu->context()->Synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cudaProfilerStop();
  r.last_loss = step_loss;
  r.step_ms = 1000 * seconds / c.steps;
  r.images_per_second = static_cast<double>(c.batch) * c.steps / seconds;
  const auto& allocator = *gpu->context()->allocator();
  r.memory_gib = static_cast<double>(allocator.stats().bytes_reserved) / (1 << 30);
  r.peak_gib = static_cast<double>(allocator.memory_use().peak) / (1 << 30);
  return r;
}

}  // namespace cohort::cuda
