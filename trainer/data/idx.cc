#include "trainer/data/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"

namespace cohort {
namespace {

// The whole (decompressed) file; gzread passes plain files through unchanged.
absl::StatusOr<std::vector<uint8_t>> ReadGzipOrPlain(const std::string& path) {
  // zlib opens a directory and then reports its read as corrupt data.
  if (struct stat st; stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory or another non-file; it should be an IDX file"));
  }
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  int n;
  while ((n = gzread(f, chunk, sizeof chunk)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  // A truncated stream ends with n == 0 and Z_BUF_ERROR, a corrupt one with n < 0.
  int err = Z_OK;
  const char* message = gzerror(f, &err);
  const std::string what = message != nullptr ? message : "";
  gzclose(f);
  if (n < 0 || err != Z_OK) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt or truncated gzip data (", what,
                                            "); reinstall or download the file again"));
  }
  return bytes;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

absl::StatusOr<IdxArray> DecodeIdx(absl::Span<const uint8_t> bytes, int rank,
                                   absl::string_view where) {
  if (bytes.size() < 4) {
    return absl::DataLossError(absl::StrCat(where, ": truncated IDX header (", bytes.size(),
                                            " bytes)"));
  }
  const uint32_t magic = BigEndian32(bytes.data());
  const uint32_t want = 0x0800u | static_cast<uint32_t>(rank);
  if (magic != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: magic number 0x%08x is not an IDX file of unsigned bytes with %d dimensions "
        "(expected 0x%08x); is this the right file?",
        where, magic, rank, want));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < header) {
    return absl::DataLossError(absl::StrCat(where, ": truncated IDX header (", bytes.size(),
                                            " bytes, need ", header, ")"));
  }
  IdxArray a;
  // A product past 64 bits is more than any file holds: an error below, not a wrap.
  uint64_t count = 1;
  bool overflow = false;
  const uint64_t have = bytes.size() - header;
  for (int i = 0; i < rank; ++i) {
    a.dims.push_back(BigEndian32(bytes.data() + 4 + 4 * i));
    overflow = overflow ||
               __builtin_mul_overflow(count, static_cast<uint64_t>(a.dims.back()), &count);
  }
  if (overflow || have < count) {
    return absl::DataLossError(absl::StrCat(
        where, ": truncated: the header promises ",
        overflow ? absl::StrJoin(a.dims, " x ") : absl::StrCat(count),
        " data bytes, the file holds ", have));
  }
  if (have > count) {
    return absl::DataLossError(absl::StrCat(where, ": ", have - count,
                                            " bytes after the data the header describes"));
  }
  a.data.assign(bytes.begin() + static_cast<ptrdiff_t>(header), bytes.end());
  return a;
}

absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int rank) {
  auto bytes = ReadGzipOrPlain(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeIdx(*bytes, rank, path);
}

}  // namespace cohort
