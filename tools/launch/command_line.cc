#include "tools/launch/command_line.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cohort::launch {

absl::StatusOr<LauncherArgs> SplitLauncherArgs(int argc, const char* const* argv) {
  static const auto* const kShortFlags =
      new std::map<std::string, std::string>{
          {"-n", "num_workers"}, {"-s", "num_shards"}, {"-H", "hosts"}};
  LauncherArgs out;
  if (argc > 0) out.flags.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      out.worker_words.assign(argv + i + 1, argv + argc);
      break;
    }
    const auto short_flag = kShortFlags->find(arg.substr(0, 2));
    std::string value = arg.size() > 2 ? arg.substr(2) : "";
    // -n, -n=V, -n<digits> (-H: -H V, -H=V); not a single-dash long name such as
    // -num_workers=2.
    if (short_flag != kShortFlags->end() &&
        (value.empty() || value[0] == '=' ||
         (short_flag->first != "-H" && absl::ascii_isdigit(value[0])))) {
      if (absl::StartsWith(value, "=")) value.erase(0, 1);
      if (value.empty()) {
        if (i + 1 >= argc || std::string(argv[i + 1]) == "--") {
          return absl::InvalidArgumentError(absl::StrCat(short_flag->first,
                                                         " needs a value: ", short_flag->first,
                                                         " N (--", short_flag->second, "=N)"));
        }
        value = argv[++i];
      }
      out.flags.push_back(absl::StrCat("--", short_flag->second, "=", value));
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out.flags.push_back(arg);  // not a flag: ParseCommandLine returns it as positional
      continue;
    }
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const size_t end = std::min(arg.find('='), arg.size());
    std::string canonical = arg;
    std::replace(canonical.begin() + dashes, canonical.begin() + end, '-', '_');
    out.flags.push_back(std::move(canonical));
  }
  return out;
}

}  // namespace cohort::launch
