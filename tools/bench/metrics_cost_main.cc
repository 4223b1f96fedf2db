// What the metrics cost a training step: nanoseconds per update × updates per step ÷ step time
// (docs/benchmarks.md). Times one step's metric updates (WorkerMetrics::StepDone), single
// counter, gauge and histogram updates, and real CPU training steps of small models, the
// cheapest steps (where the share is largest), in one run.
//   bazel run //tools/bench:metrics_cost

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "services/common/metrics.h"
#include "services/worker/worker_metrics.h"
#include "trainer/cli/args.h"
#include "trainer/loop/benchmark.h"

ABSL_FLAG(int64_t, iterations, 2000000, "metric updates timed per kind");

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double NanosecondsPerCall(int64_t n, F f) {
  const auto start = Clock::now();
  for (int64_t i = 0; i < n; ++i) f(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
         static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  cohort::ParseCommandLine(argc, argv);
  const int64_t n = absl::GetFlag(FLAGS_iterations);
  cohort::ProcessMetrics process("bench", "worker", 0);
  auto& counter = process.Counter("cohort_bench_total", "bench");
  auto& gauge = process.Gauge("cohort_bench", "bench");
  auto& histogram = process.Histogram("cohort_bench_seconds", "bench",
                                      {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1});
  const double counter_ns = NanosecondsPerCall(n, [&](int64_t) { counter.Increment(3); });
  const double gauge_ns = NanosecondsPerCall(n, [&](int64_t i) { gauge.Set(i); });
  const double histogram_ns =
      NanosecondsPerCall(n, [&](int64_t i) { histogram.Observe(0.0001 * (i % 1000)); });
  std::printf("one update: counter %.1f ns, gauge %.1f ns, histogram %.1f ns\n", counter_ns,
              gauge_ns, histogram_ns);

  cohort::WorkerMetrics worker(process, [](const cohort::v1::Progress&) {});
  cohort::StepReport report;
  report.images = 64;
  report.step_seconds = 0.005;
  report.step_result.pushed_bytes = report.step_result.pulled_bytes = 1 << 20;
  // 14 updates: images, steps, the step histogram, 5 phases, 2 byte counters, epoch, step, lr
  // and the last step's time; plus, once a window, the progress report.
  constexpr int kUpdatesPerStep = 14;
  const double step_updates_ns = NanosecondsPerCall(n / 10, [&](int64_t i) {
    report.step = i;
    worker.StepDone(report);
  });
  std::printf("one step's worker metrics (%d updates): %.1f ns, %.1f ns per update\n",
              kUpdatesPerStep, step_updates_ns, step_updates_ns / kUpdatesPerStep);

  const std::vector<cohort::BenchmarkCase> cases = {
      {"mlp", cohort::Shape{1, 28, 28}, 10, 64, 5, 200},
      {"lenet", cohort::Shape{1, 28, 28}, 10, 64, 5, 200},
      {"resnet20", cohort::Shape{3, 32, 32}, 10, 64, 2, 10},
  };
  std::printf("%-9s %6s %10s %12s\n", "model", "batch", "step ms", "metric cost");
  for (const cohort::BenchmarkCase& c : cases) {
    auto result = cohort::RunTrainingBenchmark(c);
    if (!result.ok()) {
      std::fprintf(stderr, "metrics_cost: %s: %s\n", c.model.c_str(),
                   std::string(result.status().message()).c_str());
      return 1;
    }
    std::printf("%-9s %6lld %10.3f %11.4f%%\n", c.model.c_str(), static_cast<long long>(c.batch),
                result->step_ms, 100 * step_updates_ns / (result->step_ms * 1e6));
  }
  return 0;
}
