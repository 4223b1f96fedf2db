#include "services/checkpoint/checkpoint_options.h"

#include "absl/strings/str_cat.h"

namespace cohort {

absl::Status CheckpointOptions::Validate() const {
  if (checkpoint_every < 0 || checkpoint_keep < 1) {
    return absl::InvalidArgumentError(
        "--checkpoint_every must be >= 0 steps and --checkpoint_keep >= 1");
  }
  if (checkpoint_every > 0 && folder().empty()) {
    return absl::InvalidArgumentError(
        "--checkpoint_every needs the folder: --checkpoint_dir DIR (or --resume DIR)");
  }
  return absl::OkStatus();
}

std::vector<std::string> CheckpointOptions::ToArgs() const {
  std::vector<std::string> args;
  if (!checkpoint_dir.empty()) args.push_back(absl::StrCat("--checkpoint_dir=", checkpoint_dir));
  if (!resume.empty()) args.push_back(absl::StrCat("--resume=", resume));
  if (checkpoint_every > 0) {
    args.push_back(absl::StrCat("--checkpoint_every=", checkpoint_every));
    args.push_back(absl::StrCat("--checkpoint_keep=", checkpoint_keep));
  }
  return args;
}

std::vector<std::string> CheckpointOptions::ToArgsForRestart() const {
  CheckpointOptions restarted = *this;
  restarted.checkpoint_dir = folder();
  restarted.resume = folder();
  return restarted.ToArgs();
}

}  // namespace cohort
