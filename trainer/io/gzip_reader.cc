#include "trainer/io/gzip_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<GzipReader>> GzipReader::Open(const std::string& path,
                                                             absl::string_view what) {
  if (struct stat st; stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory or another non-file; it should be ", what));
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<GzipReader>(new GzipReader(path, file));
}

GzipReader::~GzipReader() { gzclose(static_cast<gzFile>(file_)); }

absl::StatusOr<size_t> GzipReader::Read(absl::Span<char> out) {
  gzFile file = static_cast<gzFile>(file_);
  const int n = gzread(file, out.data(), static_cast<unsigned>(out.size()));
  // A truncated stream ends with n == 0 and Z_BUF_ERROR, a corrupt one with n < 0.
  int err = Z_OK;
  const char* message = gzerror(file, &err);
  if (n < 0 || err != Z_OK) {
    return absl::DataLossError(absl::StrCat(path_, ": corrupt or truncated gzip data (",
                                            message != nullptr ? message : "", ")"));
  }
  return static_cast<size_t>(n);
}

}  // namespace cohort
