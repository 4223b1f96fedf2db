#ifndef COHORT_TRAINER_IO_GZIP_READER_H_
#define COHORT_TRAINER_IO_GZIP_READER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// A file read plain or gzip-compressed (zlib tells them apart by its first bytes), a chunk at
// a time: the datasets shipped as .gz and the click logs.
class GzipReader {
 public:
  // NotFound when it cannot be opened; InvalidArgument for a directory or another non-file
  // (zlib would open it and call its read corrupt), saying it should be `what` ("an IDX file").
  static absl::StatusOr<std::unique_ptr<GzipReader>> Open(const std::string& path,
                                                          absl::string_view what);
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Up to out.size() decompressed bytes into out: how many, 0 once the file has ended. A
  // truncated or corrupt stream is DataLoss: "PATH: corrupt or truncated gzip data (zlib's
  // words)".
  absl::StatusOr<size_t> Read(absl::Span<char> out);

 private:
  GzipReader(std::string path, void* file) : path_(std::move(path)), file_(file) {}

  const std::string path_;
  void* const file_;  // a gzFile
};

}  // namespace cohort

#endif  // COHORT_TRAINER_IO_GZIP_READER_H_
