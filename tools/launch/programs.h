#ifndef COHORT_TOOLS_LAUNCH_PROGRAMS_H_
#define COHORT_TOOLS_LAUNCH_PROGRAMS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/job_env.h"

namespace cohort::launch {

// Where the programs of a job are. Paths a user typed are taken relative to `user_dir`, the
// directory they ran the command in (BUILD_WORKING_DIRECTORY under `bazel run`, which runs the
// launcher in its runfiles folder); an empty user_dir means the launcher's own.

// A role's binary: `override_path` when given (the --<role>_binary flag), else the first of
// `runfiles_dirs` that holds it at cohort/services/<role>/<binary> (the launcher's runfiles
// carry the role binaries; `binary` defaults to the role's name). Errors name where it looked
// and how to fix it.
absl::StatusOr<std::string> FindRoleBinary(Role role, const std::string& override_path,
                                           const std::vector<std::string>& runfiles_dirs,
                                           const std::string& user_dir,
                                           const std::string& binary = "");

// Calls visit(name, value) for each flag of `words` (flags for a worker binary), in order, as
// Abseil's parser reads them: -name or --name, =value or the next word, '-' in a name read as
// '_'; nothing after "--". value is empty for a flag without one.
void VisitFlags(const std::vector<std::string>& words,
                const std::function<void(const std::string& name, const std::string& value)>&
                    visit);

// The worker binary that runs the worker flags `words`: "worker_gpu" (built with the GPU
// backend) when they name GPUs (--devices=gpu..., --devices=0,1 or --gpus), else "worker".
std::string WorkerBinaryName(const std::vector<std::string>& words);

// Whether the words after the launcher's `--` are the user's own training program (the first
// word is a program) rather than flags for the worker binary (none, or the first is a flag).
bool IsUserProgram(const std::vector<std::string>& words);

// The user's program `name`: a path when it has a '/', else looked up in `path_env` (PATH) like
// a shell does. Returns an absolute path, or a relative one when user_dir is empty.
absl::StatusOr<std::string> FindProgram(const std::string& name, const std::string& path_env,
                                        const std::string& user_dir);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_PROGRAMS_H_
