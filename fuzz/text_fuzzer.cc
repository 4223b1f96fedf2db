// The text a user or a disk hands Cohort: checkpoint manifests and the launcher's command line
// (the input cut into words at NUL bytes). Hosts files and -H lists: host_list_fuzzer.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/checkpoint/checkpoint_files.h"
#include "tools/launch/command_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  cohort::ParseManifest(text).IgnoreError();
  std::vector<std::string> words = absl::StrSplit(text, absl::ByChar('\0'));
  std::vector<const char*> argv = {"launch"};
  for (const std::string& w : words) argv.push_back(w.c_str());
  cohort::launch::SplitLauncherArgs(static_cast<int>(argv.size()), argv.data()).IgnoreError();
  return 0;
}
