#include "trainer/data/idx.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "trainer/io/gzip_reader.h"

namespace cohort {
namespace {

// The whole (decompressed) file.
absl::StatusOr<std::vector<uint8_t>> ReadGzipOrPlain(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GzipReader>> file = GzipReader::Open(path, "an IDX file");
  if (!file.ok()) return file.status();
  std::vector<uint8_t> bytes;
  char chunk[1 << 16];
  while (true) {
    absl::StatusOr<size_t> n = (*file)->Read(absl::MakeSpan(chunk));
    if (!n.ok()) {
      return absl::DataLossError(
          absl::StrCat(n.status().message(), "; reinstall or download the file again"));
    }
    if (*n == 0) return bytes;
    bytes.insert(bytes.end(), chunk, chunk + *n);
  }
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
