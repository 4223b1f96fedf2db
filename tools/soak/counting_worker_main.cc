// counting_worker: the soak's worker (tools/soak/elastic_soak.py). Every step each worker pushes
// -1 for every element of every key and the shards run plain SGD at rate 1, so each step that
// stays in the job's history adds exactly 1 to every element: at the end every element equals
// the number of steps applied, whatever workers died, joined or were rolled back, which the
// soak counts from the job's log. Any lost, doubled or mixed update shows as another number.
// Run by the launcher with the job in COHORT_* variables:
//   launch -n 3 -s 2 --on_worker_failure=elastic ... -- $PWD/bazel-bin/tools/soak/counting_worker

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/data_path_tuning.h"
#include "services/worker/job_kvstore.h"
#include "trainer/base/status_macros.h"

ABSL_FLAG(int64_t, samples, 240000, "samples an epoch (a step takes batch x workers of them)");
ABSL_FLAG(int64_t, batch, 100, "samples a worker takes a step");
ABSL_FLAG(int64_t, epochs, 1, "epochs to run");
ABSL_FLAG(int, keys, 4, "keys of the model");
ABSL_FLAG(int64_t, elements, 1 << 18, "F32 elements per key");
ABSL_FLAG(int, step_ms, 20, "milliseconds of pretend compute a step");
ABSL_FLAG(std::string, result, "", "the last rank 0 writes 'STEP VALUE' here");

namespace cohort {
namespace {

// Plain SGD at rate 1 over the steps W workers run (as Train plans them).
absl::StatusOr<OptimizerSpec> CountingRule(int num_workers) {
  OptimizerSpec spec;
  spec.optimizer = "sgd";
  spec.optimizer_options = {/*momentum=*/0, /*weight_decay=*/0};
  spec.lr_schedule.kind = LrScheduleKind::kConstant;
  spec.lr_schedule.base_lr = 1;
  spec.lr_schedule.epochs = absl::GetFlag(FLAGS_epochs);
  spec.lr_schedule.steps_per_epoch =
      absl::GetFlag(FLAGS_samples) / (absl::GetFlag(FLAGS_batch) * num_workers);
  if (spec.lr_schedule.steps_per_epoch < 1) {
    return absl::InvalidArgumentError("--samples is less than --batch x workers");
  }
  return spec;
}

// The value every element of `t` holds (InternalError naming the first that differs).
absl::StatusOr<float> CommonValue(const Tensor& t, int key) {
  const absl::Span<const float> v = t.span<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != v[0]) {
      return absl::InternalError(absl::StrCat("key ", key, " element ", i, " is ", v[i],
                                              " but element 0 is ", v[0], ": updates were mixed"));
    }
  }
  return v[0];
}

// Steps from `step` to the end of the plan; every answer must hold one more than the last.
absl::Status Count(KVStore& kv, std::vector<Tensor>& values, const Tensor& grad, int64_t step,
                   int64_t end) {
  const absl::Duration compute = absl::Milliseconds(absl::GetFlag(FLAGS_step_ms));
  for (; step < end; ++step) {
    absl::SleepFor(compute);
    ASSIGN_OR_RETURN(const float before, CommonValue(values[0], 0));
    for (int k = 0; k < static_cast<int>(values.size()); ++k) {
      RETURN_IF_ERROR(kv.PushPull(k, grad, &values[k]));
    }
    for (int k = 0; k < static_cast<int>(values.size()); ++k) {
      RETURN_IF_ERROR(kv.Wait(k));
      ASSIGN_OR_RETURN(const float after, CommonValue(values[k], k));
      if (after != before + 1) {
        return absl::InternalError(absl::StrCat("step ", step, ": key ", k, " went from ", before,
                                                " to ", after, ", not by 1"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(const JobOptions job, JobOptionsFromEnvironment());
  ASSIGN_OR_RETURN(std::unique_ptr<KVStore> kv, kvstore::Create("dist_sync", job));
  KVStoreRecovery* const recovery = kv->recovery();  // a distributed store's: never null
  ASSIGN_OR_RETURN(const OptimizerSpec spec, CountingRule(kv->num_workers()));
  RETURN_IF_ERROR(kv->SetOptimizer(spec));
  recovery->SetUpdateRuleFor(CountingRule);
  const int keys = absl::GetFlag(FLAGS_keys);
  std::vector<Tensor> values;
  Tensor grad(Shape{absl::GetFlag(FLAGS_elements)});
  for (float& g : grad.span<float>()) g = -1;
  for (int k = 0; k < keys; ++k) {
    values.emplace_back(Shape{absl::GetFlag(FLAGS_elements)});
    values.back().SetZero();
    RETURN_IF_ERROR(kv->Init(k, values.back()));
  }
  const auto pull = [&]() -> absl::StatusOr<int64_t> {
    for (int k = 0; k < keys; ++k) RETURN_IF_ERROR(kv->Pull(k, &values[k]));
    return recovery->StartStep();
  };
  absl::StatusOr<int64_t> from = pull();
  while (true) {
    absl::Status failure = from.status();
    if (from.ok()) {
      ASSIGN_OR_RETURN(const OptimizerSpec plan, CountingRule(kv->num_workers()));
      const int64_t end = plan.lr_schedule.epochs * plan.lr_schedule.steps_per_epoch;
      std::printf("counting_worker: rank %d of %d: steps %lld to %lld\n", kv->rank(),
                  kv->num_workers(), static_cast<long long>(*from), static_cast<long long>(end));
      std::fflush(stdout);
      failure = Count(*kv, values, grad, *from, end);
      if (failure.ok()) {
        if (kv->rank() != 0) return absl::OkStatus();
        for (int k = 0; k < keys; ++k) RETURN_IF_ERROR(kv->Pull(k, &values[k]));
        float value = 0;
        for (int k = 0; k < keys; ++k) {
          ASSIGN_OR_RETURN(value, CommonValue(values[k], k));
        }
        std::printf("counting_worker: every element of every key is %.1f after step %lld\n",
                    value, static_cast<long long>(end));
        if (const std::string path = absl::GetFlag(FLAGS_result); !path.empty()) {
          FILE* f = std::fopen(path.c_str(), "w");
          if (f == nullptr) return absl::InternalError(absl::StrCat("cannot write ", path));
          std::fprintf(f, "%lld %.1f\n", static_cast<long long>(end), value);
          std::fclose(f);
        }
        return absl::OkStatus();
      }
    }
    RETURN_IF_ERROR(recovery->Recover(failure));
    from = pull();
  }
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  cohort::TuneForDataPath();  // as the worker binary does
  absl::ParseCommandLine(argc, argv);
  if (const absl::Status s = cohort::Run(); !s.ok()) {
    std::fprintf(stderr, "counting_worker: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
