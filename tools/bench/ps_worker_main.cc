// ps_worker: one worker of the push/pull benchmark (bench_ps starts it through the launcher).
// It pushes a model's worth of gradients and pulls the updated values, round after
// round, through the same kvstore the training workers use, and checks every pulled value.
//   launch -n W -s S -- ps_worker --tensors=25 --tensor_bytes=4194304 --rounds=10
// Prints one line: `ps_worker: rank R tensors T bytes B rounds N median_ms M min_ms m
// gbps G checked C` (GB/s per worker = 2 × model bytes / median round time).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "services/common/data_path_tuning.h"
#include "services/worker/job_kvstore.h"
#include "trainer/base/status_macros.h"
#include "trainer/cli/args.h"

ABSL_FLAG(int, tensors, 25, "tensors in the model");
ABSL_FLAG(int64_t, tensor_bytes, 4 << 20, "bytes per tensor (a multiple of 4)");
ABSL_FLAG(int, rounds, 10, "timed push+pull rounds");
ABSL_FLAG(int, warmup, 2, "untimed rounds first");
ABSL_FLAG(bool, check, true,
          "check every pulled value against the expected mean (off: with a lossy "
          "COHORT_GRADIENT_COMPRESSION the values differ)");

namespace cohort {
namespace {

// Small integers, so that sums are exact in F32; the mean is taken as the shards take it (the
// rank-order sum times 1/W), so the check can demand equality.
float GradientValue(int64_t i, int round, int rank) {
  return static_cast<float>((i + 3 * round + 5 * rank) % 8);
}

struct Outcome {
  int rank = 0;
  std::vector<double> round_ms;
  int64_t checked = 0;
};

absl::StatusOr<Outcome> Run(int tensors, int64_t elements, int warmup, int rounds) {
  ASSIGN_OR_RETURN(JobOptions job, JobOptionsFromEnvironment());
  ASSIGN_OR_RETURN(std::unique_ptr<KVStore> kv, kvstore::Create("dist_sync", job));
  const int rank = kv->rank(), workers = kv->num_workers();
  OptimizerSpec sgd;  // value -= 1 × mean gradient
  sgd.optimizer_options = {0, 0};
  sgd.lr_schedule.base_lr = 1;
  RETURN_IF_ERROR(kv->SetOptimizer(sgd));
  std::vector<Tensor> grads, values;
  for (int k = 0; k < tensors; ++k) {
    grads.emplace_back(Shape{elements});
    values.emplace_back(Shape{elements});
    values[k].SetZero();
    RETURN_IF_ERROR(kv->Init(k, values[k]));
  }
  for (int k = 0; k < tensors; ++k) RETURN_IF_ERROR(kv->Pull(k, &values[k]));
  std::vector<float> expected(elements, 0.0f);  // the same for every tensor
  Outcome out;
  out.rank = rank;
  for (int round = 0; round < warmup + rounds; ++round) {
    for (Tensor& g : grads) {
      float* p = g.data<float>();
      for (int64_t i = 0; i < elements; ++i) p[i] = GradientValue(i, round, rank);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int k = tensors - 1; k >= 0; --k) RETURN_IF_ERROR(kv->PushPull(k, grads[k], &values[k]));
    for (int k = 0; k < tensors; ++k) RETURN_IF_ERROR(kv->Wait(k));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    if (round >= warmup) out.round_ms.push_back(ms);
    for (int64_t i = 0; i < elements; ++i) {
      float sum = 0;
      for (int r = 0; r < workers; ++r) sum += GradientValue(i, round, r);
      expected[i] -= sum * (1.0f / static_cast<float>(workers));  // as the shards reduce
    }
    if (!absl::GetFlag(FLAGS_check)) continue;
    for (int k = 0; k < tensors; ++k) {
      const float* v = values[k].data<float>();
      for (int64_t i = 0; i < elements; ++i) {
        if (v[i] != expected[i]) {
          return absl::DataLossError(absl::StrCat("rank ", rank, " round ", round, " tensor ", k,
                                                  " element ", i, ": pulled ", v[i],
                                                  ", expected ", expected[i]));
        }
      }
      out.checked += elements;
    }
  }
  RETURN_IF_ERROR(kv->Barrier());
  return out;
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  cohort::TuneForDataPath();
  absl::SetProgramUsageMessage(
      "One worker of the push/pull benchmark (run by //tools/bench:bench_ps).");
  cohort::ParseCommandLine(argc, argv);
  const int tensors = absl::GetFlag(FLAGS_tensors);
  const int64_t bytes = absl::GetFlag(FLAGS_tensor_bytes);
  if (tensors < 1 || bytes < 4 || bytes % 4 != 0 || absl::GetFlag(FLAGS_rounds) < 1) {
    std::fprintf(stderr, "ps_worker: error: need --tensors >= 1, --tensor_bytes a positive "
                         "multiple of 4, --rounds >= 1\n");
    return 2;
  }
  auto out = cohort::Run(tensors, bytes / 4, absl::GetFlag(FLAGS_warmup),
                         absl::GetFlag(FLAGS_rounds));
  if (!out.ok()) {
    std::fprintf(stderr, "ps_worker: error: %s\n", std::string(out.status().message()).c_str());
    return 1;
  }
  std::vector<double> ms = out->round_ms;
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const double model_bytes = static_cast<double>(tensors) * bytes;
  std::printf(
      "ps_worker: rank %d tensors %d bytes %.0f rounds %zu median_ms %.3f min_ms %.3f gbps %.3f "
      "checked %lld\n",
      out->rank, tensors, model_bytes,
      ms.size(), median, ms.front(), 2 * model_bytes / (median * 1e-3) / 1e9,
      static_cast<long long>(out->checked));
  return 0;
}
