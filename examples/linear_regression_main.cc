// linear_regression: a training program of your own on Cohort's kvstore API. Each worker fits
// y = w·x + b on its own synthetic samples; the parameter shards average the gradients.
//   bazel run //tools:launch -- -n 2 -s 2 -- $PWD/bazel-bin/examples/linear_regression
// The launcher hands the job over in COHORT_* variables; JobOptionsFromEnvironment reads them.

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "services/worker/job_kvstore.h"

namespace {

constexpr int kFeatures = 8;
constexpr int kBatch = 32;
constexpr int kSteps = 200;

// The weights every worker's data comes from.
float TrueWeight(int i) { return 0.5f * static_cast<float>(i) - 1.0f; }
constexpr float kTrueBias = 0.75f;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "linear_regression: error: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main() {
  auto job = cohort::JobOptionsFromEnvironment();
  if (!job.ok()) return Fail(job.status());
  auto kv = cohort::kvstore::Create("dist_sync", *job);
  if (!kv.ok()) return Fail(kv.status());
  cohort::KVStore& store = **kv;

  cohort::OptimizerSpec sgd;  // plain SGD at a constant rate
  sgd.lr_schedule.base_lr = 0.1;
  sgd.lr_schedule.steps_per_epoch = kSteps;
  if (absl::Status s = store.SetOptimizer(sgd); !s.ok()) return Fail(s);
  cohort::Tensor w(cohort::Shape{kFeatures}), b(cohort::Shape{1});
  cohort::Tensor gw(cohort::Shape{kFeatures}), gb(cohort::Shape{1});
  w.SetZero();  // tensors start uninitialised
  b.SetZero();
  for (absl::Status s : {store.Init(0, w), store.Init(1, b), store.Pull(0, &w), store.Pull(1, &b)}) {
    if (!s.ok()) return Fail(s);
  }

  std::mt19937 rng(1234 + store.rank());  // each worker its own samples
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double loss = 0;
  for (int step = 0; step < kSteps; ++step) {
    // Mean squared error over the local batch and its gradient.
    std::fill(gw.span<float>().begin(), gw.span<float>().end(), 0.0f);
    gb.data<float>()[0] = 0;
    loss = 0;
    for (int n = 0; n < kBatch; ++n) {
      float x[kFeatures], y = kTrueBias, pred = b.data<float>()[0];
      for (int i = 0; i < kFeatures; ++i) {
        x[i] = normal(rng);
        y += TrueWeight(i) * x[i];
        pred += w.data<float>()[i] * x[i];
      }
      const float err = pred - y;
      loss += 0.5 * err * err / kBatch;
      for (int i = 0; i < kFeatures; ++i) gw.data<float>()[i] += err * x[i] / kBatch;
      gb.data<float>()[0] += err / kBatch;
    }
    for (absl::Status s : {store.Push(1, gb), store.Push(0, gw), store.Pull(0, &w), store.Pull(1, &b)}) {
      if (!s.ok()) return Fail(s);
    }
  }
  if (absl::Status s = store.Barrier(); !s.ok()) return Fail(s);
  double distance = std::pow(b.data<float>()[0] - kTrueBias, 2);
  for (int i = 0; i < kFeatures; ++i) distance += std::pow(w.data<float>()[i] - TrueWeight(i), 2);
  std::printf("rank %d of %d: last batch loss %.6f, |(w, b) - truth| %.6f, w[1] %.7f\n",
              store.rank(), store.num_workers(), loss, std::sqrt(distance), w.data<float>()[1]);
  return 0;
}
