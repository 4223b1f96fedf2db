#ifndef COHORT_TRAINER_IO_MAPPED_FILE_H_
#define COHORT_TRAINER_IO_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace cohort {

// A whole file mapped read-only: record files are read at random offsets by many threads, and
// the page cache serves them without a copy or a lock. Unmapped when destroyed.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  const std::string path_;
  const uint8_t* const data_;  // null for an empty file
  const size_t size_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_IO_MAPPED_FILE_H_
