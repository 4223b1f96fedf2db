#include "services/common/port_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace cohort {

namespace {

absl::Status Failed(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat("cannot ", what, " ", path, ": ", strerror(errno)));
}

// A temporary file beside path, renamed over it; with `durable`, fsync of the file before the
// rename and of the folder after it, so that a crash leaves the old file or the whole new one.
absl::Status WriteThroughTemporary(const std::string& path, absl::string_view text,
                                   bool durable) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Failed("create", absl::StrCat(temp, " (is the folder there?)"));
  absl::Status status;
  for (size_t done = 0; done < text.size() && status.ok();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) status = Failed("write", temp);  // ENOSPC: "No space left on device"
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (status.ok() && durable && fsync(fd) != 0) status = Failed("fsync", temp);
  close(fd);
  if (status.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    status = Failed("rename to", path);
  }
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  if (!durable) return absl::OkStatus();
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : path.substr(0, slash);
  const int dir = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Failed("open", folder);
  const int rc = fsync(dir);
  close(dir);
  return rc == 0 ? absl::OkStatus() : Failed("fsync", folder);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  return WriteThroughTemporary(path, text, /*durable=*/false);
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view text) {
  return WriteThroughTemporary(path, text, /*durable=*/true);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
