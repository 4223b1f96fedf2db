#ifndef COHORT_TRAINER_DATA_RECORDIO_H_
#define COHORT_TRAINER_DATA_RECORDIO_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// MXNet's RecordIO, as dmlc-core writes it (im2rec's .rec files). A record is one or more
// parts, each framed as
//   uint32 magic 0xced7230a, uint32 cflag << 29 | length, `length` bytes, zero padding to 4
// (little-endian). cflag 0: the whole record; 1, 2, 3: its first, middle and last part. A
// writer splits a record at each 4-byte-aligned occurrence of the magic in its bytes and drops
// that occurrence; a reader joins the parts with the magic between them.
inline constexpr uint32_t kRecordIOMagic = 0xced7230a;

// One record's bytes and where the next record starts.
struct RecordIORecord {
  std::string payload;
  int64_t next_offset = 0;
};

// The record starting at `offset` of a .rec file's bytes. Errors name `where` (the file), the
// offset and what is wrong: a bad magic, a part that runs past the end, parts out of order,
// non-zero padding.
absl::StatusOr<RecordIORecord> ReadRecordIO(absl::Span<const uint8_t> file, int64_t offset,
                                            absl::string_view where);

// The framed bytes of one record (what a writer appends to a .rec file).
std::string EncodeRecordIO(absl::string_view payload);

// im2rec's record: the IRHeader (uint32 flag; float label; uint64 id; uint64 id2), then, when
// flag > 0, `flag` float labels, then the encoded image.
struct ImageRecord {
  std::vector<float> labels;  // one (the header's label) unless flag > 0
  uint64_t id = 0;
  uint64_t id2 = 0;
  std::string image;  // the encoded image (JPEG as im2rec packs it)
};

// Errors name `where` and say what is short.
absl::StatusOr<ImageRecord> DecodeImageRecord(absl::string_view payload,
                                              absl::string_view where);
// The payload im2rec would write (flag 0 for one label, else the labels after the header).
std::string EncodeImageRecord(const ImageRecord& record);

// A .idx file: a line "id<TAB>offset" per record. Offsets must lie inside a .rec file of
// rec_size bytes; errors name `where`, the line and what is wrong.
absl::StatusOr<std::vector<std::pair<uint64_t, int64_t>>> ParseRecordIOIndex(
    absl::string_view text, int64_t rec_size, absl::string_view where);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_RECORDIO_H_
