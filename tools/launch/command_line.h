#ifndef COHORT_TOOLS_LAUNCH_COMMAND_LINE_H_
#define COHORT_TOOLS_LAUNCH_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::launch {

struct LauncherArgs {
  // The launcher's own arguments, argv[0] first, spelled for absl::ParseCommandLine.
  std::vector<std::string> flags;
  // Everything after the first bare "--", untouched: the worker's flags or the user's command.
  std::vector<std::string> worker_words;
};

// Splits `launch -n 2 -s 2 --job-id x -- cmd args` at the first bare "--" and makes the
// launcher's part parseable by Abseil, which knows neither single-dash short flags nor hyphens
// in names: `-n V`, `-n=V`, `-nV` become `--num_workers=V` (`-s`: `--num_shards`; `-H V` and
// `-H=V`: `--hosts=V`), and hyphens
// in flag names become underscores (`--job-id` → `--job_id`); values are left alone. Fails when
// -n or -s has no value.
absl::StatusOr<LauncherArgs> SplitLauncherArgs(int argc, const char* const* argv);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_COMMAND_LINE_H_
