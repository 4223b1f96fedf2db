#include "tools/bench/proc_usage.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace cohort {

absl::Duration ProcessCpuTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  // Fields after the command's closing parenthesis: state is the 3rd, utime the 14th.
  const size_t name_end = stat.rfind(')');
  unsigned long utime = 0, stime = 0;
  if (name_end == std::string::npos ||
      std::sscanf(stat.c_str() + name_end + 2,
                  "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2) {
    return absl::ZeroDuration();
  }
  return absl::Seconds(static_cast<double>(utime + stime) /
                       static_cast<double>(sysconf(_SC_CLK_TCK)));
}

int64_t ProcessResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // in kB
  }
  return 0;
}

}  // namespace cohort
