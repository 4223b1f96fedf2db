// gpu_bench: single-GPU training speed of the built-in models (cuDNN/cuBLAS backend).
//   bazel run //trainer/gpu:gpu_bench -- --model resnet50 --batch_size 256 --precision bf16
// Prints one line per run: model, batch, precision, layout, images/sec, step time, peak and
// reserved memory.
// tools/gpu/torch_resnet_bench.py measures PyTorch on the same cases.

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "trainer/cli/args.h"
#include "trainer/gpu/gpu_benchmark.h"

ABSL_FLAG(std::string, model, "resnet50", "model to train (resnet50, resnet56, resnet20, lenet, ...)");
ABSL_FLAG(int64_t, batch_size, 128, "images per step");
ABSL_FLAG(std::string, precision, "bf16", "fp32, tf32, bf16 or fp16");
ABSL_FLAG(std::string, layout, "nhwc", "activation layout: nhwc (channels-last) or nchw");
ABSL_FLAG(int, gpu, 0, "GPU index");
ABSL_FLAG(int, warmup, 5, "untimed steps before timing");
ABSL_FLAG(int, steps, 30, "timed steps");
ABSL_FLAG(bool, fuse_bn_relu, cohort::cuda::CudaBackendOptions{}.fuse_batch_norm_relu,
          "batch norm and the ReLU after it as one cuDNN call (16-bit precisions, nhwc)");
ABSL_FLAG(bool, cuda_graph, false,
          "launch the timed steps from a CUDA graph of one step (not with fp16 or "
          "--read_loss_every_step)");
ABSL_FLAG(bool, read_loss_every_step, false,
          "wait for every step's loss on the host, as the trainer does (else only the first and "
          "last steps' are read, as in PyTorch's loop)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times training steps (forward, loss, backward, SGD) of a model on one GPU on synthetic "
      "data.\n  gpu_bench --model resnet50 --batch_size 256 --precision bf16");
  cohort::ParseCommandLine(argc, argv);
  auto precision = cohort::ParsePrecision(absl::GetFlag(FLAGS_precision));
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (!precision.ok() || (layout != "nhwc" && layout != "nchw")) {
    std::cerr << "gpu_bench: error: "
              << (precision.ok() ? "--layout=" + layout + ": expected nhwc or nchw"
                                 : std::string(precision.status().message()))
              << "\n";
    return 2;
  }
  cohort::cuda::GpuBenchmarkCase c;
  c.model = absl::GetFlag(FLAGS_model);
  c.batch = absl::GetFlag(FLAGS_batch_size);
  c.backend = {absl::GetFlag(FLAGS_gpu), *precision, layout == "nhwc"};
  c.backend.fuse_batch_norm_relu = absl::GetFlag(FLAGS_fuse_bn_relu);
  c.cuda_graph = absl::GetFlag(FLAGS_cuda_graph);
  c.warmup_steps = absl::GetFlag(FLAGS_warmup);
  c.steps = absl::GetFlag(FLAGS_steps);
  c.read_loss_every_step = absl::GetFlag(FLAGS_read_loss_every_step);
  auto r = cohort::cuda::RunGpuBenchmark(c);
  if (!r.ok()) {
    std::cerr << "gpu_bench: error: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << absl::StrFormat(
      "cohort %s bs=%d %s %s%s%s: %.1f images/sec (step %.2f ms, peak memory %.2f GiB, %.2f GiB "
      "reserved; loss %.4f -> %.4f over %d steps)\n",
      c.model, c.batch, cohort::PrecisionName(*precision), layout,
      std::string(c.backend.fuse_batch_norm_relu ? "" : ", bn+relu not fused") +
          (c.cuda_graph ? ", CUDA graph" : ""),
      c.read_loss_every_step ? ", loss read every step" : "", r->images_per_second,
      r->step_ms, r->peak_gib, r->memory_gib, r->first_loss, r->last_loss,
      c.warmup_steps + c.steps + (c.cuda_graph ? 1 : 0));  // the graph's capture is a step
  return 0;
}
