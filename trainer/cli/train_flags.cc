#include "trainer/cli/train_flags.h"

#include <cstdlib>
#include <iostream>
#include <vector>

#include "absl/flags/parse.h"
#include "trainer/cli/args.h"

namespace cohort {

bool ParseTrainCommandLine(const char* program, int argc, char** argv) {
  std::vector<std::string> args = CanonicalFlagArgs(argc, argv, StandardFlagAliases());
  std::vector<char*> canonical;
  for (std::string& a : args) canonical.push_back(a.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(canonical.size()), canonical.data());
  if (positional.size() > 1) {
    std::cerr << program << ": error: unexpected argument '" << positional[1]
              << "' (flags are --name=value; see --help)\n";
    return false;
  }
  return true;
}

TrainOptions TrainOptionsFromFlags() {
  // Relative paths are relative to where the user ran the command, even under `bazel run`.
  const char* user_dir_env = std::getenv("BUILD_WORKING_DIRECTORY");
  const std::string user_dir = user_dir_env != nullptr ? user_dir_env : "";
  TrainOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.data_dir = ResolveUserPath(absl::GetFlag(FLAGS_data_dir), user_dir);
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
  o.output = ResolveUserPath(absl::GetFlag(FLAGS_output), user_dir);
  o.devices = absl::GetFlag(FLAGS_devices);
  return o;
}

}  // namespace cohort
