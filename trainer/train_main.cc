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

ABSL_FLAG(std::string, model, kDefaults.model,
          "model: lenet, mlp, resnet20, resnet32, resnet44, resnet56, resnet110 or resnet50 "
          "(alias --network)");
ABSL_FLAG(std::string, dataset, kDefaults.dataset,
          "dataset: fashion-mnist, mnist, cifar10, synthetic-cifar10, synthetic-imagenet or "
          "synthetic:CxHxW:K");
ABSL_FLAG(std::string, data_dir, "",
          "directory of the dataset's IDX files (default /usr/share/datasets/<dataset>)");
ABSL_FLAG(int64_t, batch_size, kDefaults.batch_size, "images per step");
ABSL_FLAG(int64_t, epochs, kDefaults.epochs, "passes over the training set");
ABSL_FLAG(std::string, optimizer, kDefaults.optimizer, "optimizer: sgd or adam");
ABSL_FLAG(double, lr, kDefaults.lr, "base learning rate");
ABSL_FLAG(std::string, lr_schedule, kDefaults.lr_schedule,
          "learning-rate schedule: constant, step (x0.1 at 50% and 75% of the epochs), cosine "
          "or poly (power 2)");
ABSL_FLAG(double, warmup_epochs, kDefaults.warmup_epochs,
          "epochs of linear learning-rate warm-up before the schedule (may be fractional)");
ABSL_FLAG(bool, scale_lr, kDefaults.scale_lr,
          "linear scaling rule: use lr x global batch / 256 as the base learning rate");
ABSL_FLAG(std::string, augment, kDefaults.augment,
          "training augmentation: none, flip (random horizontal flip) or crop_flip (random "
          "crop with side/8 zero padding, then flip)");
ABSL_FLAG(double, momentum, kDefaults.momentum, "SGD momentum (sgd only)");
ABSL_FLAG(double, wd, kDefaults.wd, "weight decay (L2)");
ABSL_FLAG(std::string, kv_store, kDefaults.kv_store,
          "parameter store: local (dist_sync and dist_async run in workers the launcher starts)");
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
  o.optimizer = absl::GetFlag(FLAGS_optimizer);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  o.warmup_epochs = absl::GetFlag(FLAGS_warmup_epochs);
  o.scale_lr = absl::GetFlag(FLAGS_scale_lr);
  o.augment = absl::GetFlag(FLAGS_augment);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.wd = absl::GetFlag(FLAGS_wd);
  o.kv_store = absl::GetFlag(FLAGS_kv_store);
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
