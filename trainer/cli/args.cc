#include "trainer/cli/args.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"

namespace cohort {

std::vector<std::string> CanonicalFlagArgs(int argc, char** argv,
                                           const std::map<std::string, std::string>& aliases) {
  std::vector<std::string> out;
  bool flags_done = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") flags_done = true;
    if (i == 0 || flags_done || arg.size() < 3 || arg[0] != '-') {
      out.push_back(arg);
      continue;
    }
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    std::string name = arg.substr(dashes, eq == std::string::npos ? std::string::npos : eq - dashes);
    std::replace(name.begin(), name.end(), '-', '_');
    auto alias = aliases.find(name);
    if (alias != aliases.end()) name = alias->second;
    out.push_back(arg.substr(0, dashes) + name + (eq == std::string::npos ? "" : arg.substr(eq)));
  }
  return out;
}

std::vector<char*> ParseCommandLine(int argc, char** argv) {
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) != -1) {
    std::exit(0);
  }
  return positional;
}

bool ParseCanonicalCommandLine(const char* program, int argc, char** argv,
                               const std::map<std::string, std::string>& aliases) {
  std::vector<std::string> args = CanonicalFlagArgs(argc, argv, aliases);
  std::vector<char*> canonical;
  for (std::string& a : args) canonical.push_back(a.data());
  const std::vector<char*> positional =
      ParseCommandLine(static_cast<int>(canonical.size()), canonical.data());
  if (positional.size() > 1) {
    std::cerr << program << ": error: unexpected argument '" << positional[1]
              << "' (flags are --name=value; see --help)\n";
    return false;
  }
  return true;
}

const std::map<std::string, std::string>& StandardFlagAliases() {
  static const auto* const aliases =
      new std::map<std::string, std::string>{{"network", "model"}, {"gpus", "devices"}};
  return *aliases;
}

std::string UserDirectory() {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return dir != nullptr ? dir : "";
}

std::string ResolveUserPath(const std::string& path, const std::string& user_dir) {
  if (path.empty() || path[0] == '/' || user_dir.empty()) return path;
  return user_dir + "/" + path;
}

}  // namespace cohort
