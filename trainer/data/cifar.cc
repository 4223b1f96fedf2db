#include "trainer/data/cifar.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

constexpr int kClasses = 10;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The whole file, or an error naming it and saying what to do.
absl::StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err != ENOENT) return absl::FailedPreconditionError(what);
    return absl::NotFoundError(absl::StrCat(
        what, "; download the CIFAR-10 binary version (cifar-10-binary.tar.gz from "
              "https://www.cs.toronto.edu/~kriz/cifar.html, not the Python or MATLAB one), "
              "unpack it and pass --data_dir with the directory that holds data_batch_1.bin"));
  }
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) {
    return absl::DataLossError(absl::StrCat("cannot read ", path, " after ", bytes.size(),
                                            " bytes; check the disk or copy the file again"));
  }
  return bytes;
}

}  // namespace

absl::Status AppendCifar10Records(absl::Span<const uint8_t> bytes, absl::string_view where,
                                  ImageDataset* d) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  if (size == 0) {
    return absl::DataLossError(
        absl::StrCat(where, " is empty; download and unpack the CIFAR-10 binary version again"));
  }
  if (size % kCifar10RecordBytes != 0) {
    return absl::DataLossError(absl::StrCat(
        where, ": size ", size, " bytes is not a whole number of ", kCifar10RecordBytes,
        "-byte CIFAR-10 records (", size / kCifar10RecordBytes, " records and ",
        size % kCifar10RecordBytes,
        " bytes over); the file is truncated or not from the CIFAR-10 binary version"));
  }
  const int64_t records = size / kCifar10RecordBytes;
  d->labels.reserve(d->labels.size() + static_cast<size_t>(records));
  d->pixels.reserve(d->pixels.size() + static_cast<size_t>(records * (kCifar10RecordBytes - 1)));
  for (int64_t r = 0; r < records; ++r) {
    const uint8_t* record = bytes.data() + r * kCifar10RecordBytes;
    if (record[0] >= kClasses) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": label ", int{record[0]}, " of record ", r, " (byte offset ",
          r * kCifar10RecordBytes, ") is outside [0, ", kClasses,
          "); the file is corrupt or not from the CIFAR-10 binary version"));
    }
    d->labels.push_back(record[0]);
    d->pixels.insert(d->pixels.end(), record + 1, record + kCifar10RecordBytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageDataset> ReadCifar10(const std::vector<std::string>& paths,
                                         const std::string& name) {
  ImageDataset d;
  d.name = name;
  d.sample_shape = Shape{3, 32, 32};
  d.num_classes = kClasses;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes, ReadFile(path));
    RETURN_IF_ERROR(AppendCifar10Records(bytes, path, &d));
  }
  return d;
}

absl::StatusOr<TrainTestData> LoadCifar10(const std::string& dir) {
  const std::string unpacked = dir + "/cifar-10-batches-bin";
  const std::string root =
      !Exists(dir + "/data_batch_1.bin") && Exists(unpacked) ? unpacked : dir;
  std::vector<std::string> train_files;
  for (int i = 1; i <= 5; ++i) train_files.push_back(absl::StrCat(root, "/data_batch_", i, ".bin"));
  TrainTestData d;
  ASSIGN_OR_RETURN(d.train, ReadCifar10(train_files, "cifar10 train"));
  ASSIGN_OR_RETURN(d.test, ReadCifar10({root + "/test_batch.bin"}, "cifar10 test"));
  return d;
}

}  // namespace cohort
