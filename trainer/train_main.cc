// train: trains a model in one process. `bazel run //trainer:train -- --help` lists the flags.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "trainer/cli/args.h"
#include "trainer/training.h"

namespace {
const cohort::TrainOptions kDefaults;
}  // namespace

ABSL_FLAG(std::string, model, kDefaults.model, "model: lenet or mlp (alias --network)");
ABSL_FLAG(std::string, dataset, kDefaults.dataset, "dataset: fashion-mnist or mnist");
ABSL_FLAG(std::string, data_dir, "",
          "directory of the dataset's IDX files (default /usr/share/datasets/<dataset>)");
ABSL_FLAG(int64_t, batch_size, kDefaults.batch_size, "images per step");
ABSL_FLAG(int64_t, epochs, kDefaults.epochs, "passes over the training set");
ABSL_FLAG(double, lr, kDefaults.lr, "learning rate");
ABSL_FLAG(double, momentum, kDefaults.momentum, "SGD momentum");
ABSL_FLAG(double, wd, kDefaults.wd, "weight decay (L2)");
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "seed of initialisation and data order");
ABSL_FLAG(int64_t, log_interval, kDefaults.log_interval, "steps between progress rows");
ABSL_FLAG(std::string, output, kDefaults.output,
          "where to write the trained model (safetensors); empty: don't");
ABSL_FLAG(std::string, devices, kDefaults.devices, "compute devices: cpu (alias --gpus)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains a model on one machine and writes it as safetensors.\n"
      "  bazel run //trainer:train -- --model lenet --dataset fashion-mnist --epochs 10");
  std::vector<std::string> args = cohort::CanonicalFlagArgs(argc, argv, cohort::StandardFlagAliases());
  std::vector<char*> canonical;
  for (std::string& a : args) canonical.push_back(a.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(canonical.size()), canonical.data());
  if (positional.size() > 1) {
    std::cerr << "train: error: unexpected argument '" << positional[1]
              << "' (flags are --name=value; see --help)\n";
    return 2;
  }
  // Relative paths are relative to where the user ran the command, even under `bazel run`.
  const char* user_dir_env = std::getenv("BUILD_WORKING_DIRECTORY");
  const std::string user_dir = user_dir_env != nullptr ? user_dir_env : "";

  cohort::TrainOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.data_dir = cohort::ResolveUserPath(absl::GetFlag(FLAGS_data_dir), user_dir);
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.wd = absl::GetFlag(FLAGS_wd);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.log_interval = absl::GetFlag(FLAGS_log_interval);
  o.output = cohort::ResolveUserPath(absl::GetFlag(FLAGS_output), user_dir);
  o.devices = absl::GetFlag(FLAGS_devices);

  auto result = cohort::Train(o, std::cout);
  if (!result.ok()) {
    std::cerr << "train: error: " << result.status().message() << "\n";
    return 1;
  }
  return 0;
}
