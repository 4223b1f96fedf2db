// train: trains a model in one process. `bazel run //trainer:train -- --help` lists the flags.

#include <iostream>

#include "absl/flags/usage.h"
#include "trainer/base/crash_report.h"
#include "trainer/cli/args.h"
#include "trainer/cli/train_flags.h"
#include "trainer/loop/training.h"

COHORT_DEFINE_TRAIN_FLAGS();

int main(int argc, char** argv) {
  cohort::ReportCrashes(argv[0]);
  absl::SetProgramUsageMessage(
      "Trains a model on one machine and writes it as safetensors.\n"
      "  bazel run //trainer:train -- --model lenet --dataset fashion-mnist --epochs 10");
  if (!cohort::ParseCanonicalCommandLine("train", argc, argv, cohort::StandardFlagAliases())) return 2;
  auto result = cohort::Train(cohort::TrainOptionsFromFlags(), cohort::CreateKVStore, std::cout);
  if (!result.ok()) {
    std::cerr << "train: error: " << result.status().message() << "\n";
    return 1;
  }
  return 0;
}
