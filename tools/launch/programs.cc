#include "tools/launch/programs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "trainer/cli/args.h"

namespace cohort::launch {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::StatusOr<std::string> FindRoleBinary(Role role, const std::string& override_path,
                                           const std::vector<std::string>& runfiles_dirs,
                                           const std::string& user_dir,
                                           const std::string& binary) {
  const std::string name = RoleName(role);
  const std::string file = binary.empty() ? name : binary;
  if (!override_path.empty()) {
    const std::string path = ResolveUserPath(override_path, user_dir);
    if (IsExecutableFile(path)) return path;
    return absl::NotFoundError(absl::StrCat("the ", name, " binary given by --", name, "_binary, ",
                                            path, ", is not an executable file"));
  }
  const std::string relative = absl::StrCat("cohort/services/", name, "/", file);
  std::vector<std::string> tried;
  for (const std::string& dir : runfiles_dirs) {
    if (dir.empty()) continue;
    std::string path = absl::StrCat(dir, "/", relative);
    if (IsExecutableFile(path)) return path;
    tried.push_back(std::move(path));
  }
  return absl::NotFoundError(absl::StrCat(
      "cannot find the ", name, " binary at ",
      tried.empty() ? std::string("(no runfiles folder)") : absl::StrJoin(tried, " or "),
      "; build //services:", file,
      file == "worker_gpu" ? " (on a machine with the CUDA toolkit)" : "", " or pass --", name,
      "_binary"));
}

void VisitFlags(const std::vector<std::string>& words,
                const std::function<void(const std::string& name, const std::string& value)>&
                    visit) {
  for (size_t i = 0; i < words.size(); ++i) {
    absl::string_view word = words[i];
    if (word == "--") break;
    if (!absl::ConsumePrefix(&word, "--") && !absl::ConsumePrefix(&word, "-")) continue;
    const size_t eq = word.find('=');
    std::string name(word.substr(0, eq));
    std::replace(name.begin(), name.end(), '-', '_');
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(word.substr(eq + 1));
    } else if (i + 1 < words.size()) {
      value = words[i + 1];
    }
    visit(name, value);
  }
}

std::string WorkerBinaryName(const std::vector<std::string>& words) {
  bool gpu = false;  // the last --devices or --gpus counts, as for the flag parser
  VisitFlags(words, [&](const std::string& name, const std::string& value) {
    if (name != "devices" && name != "gpus") return;
    gpu = name == "gpus" || absl::StartsWith(value, "gpu") ||
          (!value.empty() && absl::ascii_isdigit(value[0]));
  });
  return gpu ? "worker_gpu" : "worker";
}

bool IsUserProgram(const std::vector<std::string>& words) {
  return !words.empty() && !words[0].empty() && words[0][0] != '-';
}

absl::StatusOr<std::string> FindProgram(const std::string& name, const std::string& path_env,
                                        const std::string& user_dir) {
  if (name.find('/') != std::string::npos) {
    const std::string path = ResolveUserPath(name, user_dir);
    if (IsExecutableFile(path)) return path;
    return absl::NotFoundError(
        absl::StrCat("cannot run ", name, ": ", path, " is not an executable file"));
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    const std::string path = ResolveUserPath(absl::StrCat(dir, "/", name), user_dir);
    if (IsExecutableFile(path)) return path;
  }
  return absl::NotFoundError(absl::StrCat("cannot find the program '", name, "' in PATH (",
                                          path_env, "); give its path, e.g. ./", name));
}

}  // namespace cohort::launch
