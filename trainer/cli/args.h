#ifndef COHORT_TRAINER_CLI_ARGS_H_
#define COHORT_TRAINER_CLI_ARGS_H_

#include <map>
#include <string>
#include <vector>

namespace cohort {

// The argument list with flag names made canonical before Abseil parses it: hyphens in names
// become underscores (--kv-store → --kv_store) and aliases map to their flag
// (--network → --model). Values and everything after a bare "--" are left alone.
std::vector<std::string> CanonicalFlagArgs(int argc, char** argv,
                                           const std::map<std::string, std::string>& aliases);

// absl::ParseCommandLine, except that --help (and Abseil's other usage flags) print their text
// and exit 0: asking for help is not an error (Debian's Abseil exits 1).
std::vector<char*> ParseCommandLine(int argc, char** argv);

// Parses argv with ParseCommandLine after CanonicalFlagArgs. Prints an error naming the program and
// returns false when positional arguments are left.
bool ParseCanonicalCommandLine(const char* program, int argc, char** argv,
                               const std::map<std::string, std::string>& aliases);

// The flag aliases of the Contracts (--network, --gpus).
const std::map<std::string, std::string>& StandardFlagAliases();

// A path the user typed, made absolute against the directory they ran the command in
// (BUILD_WORKING_DIRECTORY under `bazel run`; empty means the process's own).
std::string ResolveUserPath(const std::string& path, const std::string& user_dir);

// The directory the user ran the command in: BUILD_WORKING_DIRECTORY under `bazel run`, else
// empty (the process's own).
std::string UserDirectory();

}  // namespace cohort

#endif  // COHORT_TRAINER_CLI_ARGS_H_
