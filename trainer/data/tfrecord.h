#ifndef COHORT_TRAINER_DATA_TFRECORD_H_
#define COHORT_TRAINER_DATA_TFRECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// TensorFlow's TFRecord files: each record is
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, `length` bytes, uint32 masked
//   CRC-32C of them
// (little-endian; crc32c.h).
struct TFRecord {
  std::string payload;
  int64_t next_offset = 0;
};

// The record starting at `offset` of a file's bytes, its framing and both CRCs checked. Errors
// name `where` (the file), the offset and what is wrong.
// Where the record after the one at `offset` starts: its head's CRC and its length checked
// against the file, its bytes not read (what listing a file's records needs).
absl::StatusOr<int64_t> NextTFRecord(absl::Span<const uint8_t> file, int64_t offset,
                                     absl::string_view where);
absl::StatusOr<TFRecord> ReadTFRecord(absl::Span<const uint8_t> file, int64_t offset,
                                      absl::string_view where);
std::string EncodeTFRecord(absl::string_view payload);

// A tf.train.Example of an image, as TF's ImageNet preprocessing writes it: "image/encoded"
// (the JPEG) and "image/class/label". Those files number the classes 1..1000 (0 meant
// "background"): the label read is the stored one less label_base (1 for them, 0 for files that
// count from 0); one below 0 is an error.
struct ImageExample {
  std::string image;
  int64_t label = 0;
};
absl::StatusOr<ImageExample> DecodeImageExample(absl::string_view payload, int64_t label_base,
                                                absl::string_view where);
std::string EncodeImageExample(absl::string_view image, int64_t stored_label);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_TFRECORD_H_
