// bench: CPU training throughput and framework overhead of the built-in models.
//   bazel run //trainer:bench
//   bazel run //trainer:bench -- --cases resnet20:128 --steps 20

#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "trainer/cli/args.h"
#include "trainer/loop/benchmark.h"
#include "trainer/models/models.h"

ABSL_FLAG(std::string, cases, "lenet:64,lenet:128,resnet20:64,resnet20:128,resnet50:32",
          "comma-separated model:batch pairs");
ABSL_FLAG(int, steps, 10, "timed steps per case (ResNet-50 runs a fifth of them, at least 2)");
ABSL_FLAG(int, warmup_steps, 2, "untimed steps before timing");
ABSL_FLAG(std::string, layout, "blocked",
          "how activations are held between ops: blocked (oneDNN's nChw16c/nChw8c where the "
          "channels fill blocks) or plain (NCHW, each convolution reordering its own)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Times CPU training steps (oneDNN) on synthetic data and the share of each step spent "
      "outside oneDNN primitives.\n  bazel run //trainer:bench");
  cohort::ParseCommandLine(argc, argv);
  const std::string layout = absl::GetFlag(FLAGS_layout);
  if (layout != "blocked" && layout != "plain") {
    std::cerr << "bench: error: --layout is '" << layout << "'; give blocked or plain\n";
    return 2;
  }
  std::cout << absl::StrFormat("%d hardware threads\n", std::thread::hardware_concurrency());
  std::cout << absl::StrFormat("%-10s %6s %14s %10s %10s %10s\n", "Model", "Batch",
                               "Images/sec", "Step(ms)", "Overhead", "Peak(MiB)");
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_cases), ',')) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    int64_t batch = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &batch) || batch <= 0) {
      std::cerr << "bench: error: --cases entry '" << item << "' is not model:batch\n";
      return 2;
    }
    cohort::BenchmarkCase c;
    c.model = parts[0];
    c.batch = batch;
    const cohort::BenchmarkSample sample = cohort::BenchmarkSampleFor(c.model);
    c.sample_shape = sample.shape;
    c.num_classes = sample.num_classes;
    // ImageNet-sized models run a fifth of the steps.
    c.steps = sample.num_classes == 1000 ? std::max(2, absl::GetFlag(FLAGS_steps) / 5)
                                         : absl::GetFlag(FLAGS_steps);
    c.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
    c.layout = layout == "blocked" ? cohort::ActivationLayout::kBlocked
                                   : cohort::ActivationLayout::kPlain;
    auto r = cohort::RunTrainingBenchmark(c);
    if (!r.ok()) {
      std::cerr << "bench: error: " << r.status().message() << "\n";
      return 1;
    }
    std::cout << absl::StrFormat("%-10s %6d %14.1f %10.1f %9.1f%% %10.1f\n", c.model, c.batch,
                                 r->images_per_second, r->step_ms, 100 * r->framework_overhead,
                                 static_cast<double>(r->peak_bytes) / (1 << 20));
    std::cout.flush();
  }
  return 0;
}
