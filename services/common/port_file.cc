#include "services/common/port_file.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/common/durable_file.h"
#include "trainer/io/whole_file.h"

namespace cohort {

absl::Status WritePortFile(const std::string& path, int port) {
  return WriteFileAtomically(path, absl::StrCat(port, "\n"));
}

absl::StatusOr<std::optional<int>> ReadPortFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return std::nullopt;
  int port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &port) || port <= 0 ||
      port > 65535) {
    return absl::DataLossError(
        absl::StrCat("port file ", path, " holds '", *text, "', not a port number"));
  }
  return port;
}

}  // namespace cohort
