#ifndef COHORT_TOOLS_LAUNCH_LINE_PREFIXER_H_
#define COHORT_TOOLS_LAUNCH_LINE_PREFIXER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace cohort::launch {

// Turns one child's output stream, read in arbitrary chunks, into whole lines that each start
// with the child's name (`[worker 1] `), so the output of many processes sharing the launcher's
// stdout stays readable: a line is written only once it is complete, never interleaved with
// another child's. Not thread-safe; one instance per stream.
class LinePrefixer {
 public:
  // A partial line that grows past this many bytes is written as a line of its own, so a child
  // that never writes '\n' (a `\r` progress bar) cannot make the launcher hold unbounded output.
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Starts a line meant for the launcher, not the user (the remote wrapper's announcements,
  // remote.h): an ASCII record separator, which no log line starts with.
  static constexpr char kControl = '\x1e';

  // Appends to *out every line that `bytes` completes, each as prefix + line + '\n' (empty lines
  // too); keeps a trailing partial line for the next call. When `control` is given, a line that
  // starts with kControl goes there instead, without kControl and '\n'.
  void Feed(absl::string_view bytes, std::string* out,
            std::vector<std::string>* control = nullptr);

  // Appends the held partial line, prefixed and ended with '\n', if there is one. For the end of
  // the stream.
  void Flush(std::string* out);

 private:
  const std::string prefix_;
  std::string partial_;  // bytes after the last '\n' seen
};

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_LINE_PREFIXER_H_
