#include "tools/launch/programs.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cohort::launch {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string UserPath(const std::string& path, const std::string& user_dir) {
  if (path.empty() || path[0] == '/' || user_dir.empty()) return path;
  return absl::StrCat(user_dir, "/", path);
}

}  // namespace

absl::StatusOr<std::string> FindRoleBinary(Role role, const std::string& override_path,
                                           const std::vector<std::string>& runfiles_dirs,
                                           const std::string& user_dir) {
  const std::string name = RoleName(role);
  if (!override_path.empty()) {
    const std::string path = UserPath(override_path, user_dir);
    if (IsExecutableFile(path)) return path;
    return absl::NotFoundError(absl::StrCat("the ", name, " binary given by --", name, "_binary, ",
                                            path, ", is not an executable file"));
  }
  const std::string relative = absl::StrCat("cohort/services/", name, "/", name);
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
      "; build //services:", name, " or pass --", name, "_binary"));
}

bool IsUserProgram(const std::vector<std::string>& words) {
  return !words.empty() && !words[0].empty() && words[0][0] != '-';
}

absl::StatusOr<std::string> FindProgram(const std::string& name, const std::string& path_env,
                                        const std::string& user_dir) {
  if (name.find('/') != std::string::npos) {
    const std::string path = UserPath(name, user_dir);
    if (IsExecutableFile(path)) return path;
    return absl::NotFoundError(
        absl::StrCat("cannot run ", name, ": ", path, " is not an executable file"));
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    const std::string path = UserPath(absl::StrCat(dir, "/", name), user_dir);
    if (IsExecutableFile(path)) return path;
  }
  return absl::NotFoundError(absl::StrCat("cannot find the program '", name, "' in PATH (",
                                          path_env, "); give its path, e.g. ./", name));
}

}  // namespace cohort::launch
