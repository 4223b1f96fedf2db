#include "services/common/durable_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

absl::Status Failed(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat("cannot ", what, " ", path, ": ", strerror(errno)));
}

// With `durable`, fsyncs the file before the rename and its folder after it. A secret is
// readable by its owner only before a byte of it is written.
absl::Status WriteThroughTemporary(const std::string& path, absl::string_view text,
                                   bool durable, bool secret = false) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  // A secret goes to a file of its own: a leftover one may be open elsewhere, or a link.
  if (secret) unlink(temp.c_str());
  const int fd = open(temp.c_str(),
                      secret ? O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
                             : O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                      secret ? 0600 : 0644);
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

absl::Status WriteFileAtomically(const std::string& path, absl::string_view text) {
  return WriteThroughTemporary(path, text, /*durable=*/false);
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view text) {
  return WriteThroughTemporary(path, text, /*durable=*/true);
}

absl::Status WriteSecretFile(const std::string& path, absl::string_view text) {
  return WriteThroughTemporary(path, text, /*durable=*/false, /*secret=*/true);
}

}  // namespace cohort
