#include "trainer/data/tfrecord.h"

#include "absl/strings/str_format.h"
#include "proto/tf_example.pb.h"
#include "trainer/data/crc32c.h"

namespace cohort {

namespace {

constexpr char kImageKey[] = "image/encoded";
constexpr char kLabelKey[] = "image/class/label";

uint64_t LoadLittle(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

void AppendLittle(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

absl::string_view View(const uint8_t* p, int64_t n) {
  return absl::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
}

}  // namespace

absl::StatusOr<int64_t> NextTFRecord(absl::Span<const uint8_t> file, int64_t offset,
                                     absl::string_view where) {
  const int64_t size = static_cast<int64_t>(file.size());
  const auto fail = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrFormat("%s: the TFRecord at byte offset %d: %s", where, offset, why));
  };
  if (offset < 0 || offset + 12 > size) {
    return fail(absl::StrFormat("the file ends after %d bytes, inside its 12-byte head", size));
  }
  const uint8_t* head = file.data() + offset;
  const uint64_t length = LoadLittle(head, 8);
  if (static_cast<uint32_t>(LoadLittle(head + 8, 4)) != MaskedCrc32c(View(head, 8))) {
    return fail("the CRC of its length does not match: not a TFRecord file, or a damaged one");
  }
  if (length > static_cast<uint64_t>(size - offset - 12) ||
      size - offset - 12 - static_cast<int64_t>(length) < 4) {
    return fail(absl::StrFormat("it holds %d bytes but the file ends %d bytes after its head: a "
                                "truncated file",
                                length, size - offset - 12));
  }
  return offset + 12 + static_cast<int64_t>(length) + 4;
}

absl::StatusOr<TFRecord> ReadTFRecord(absl::Span<const uint8_t> file, int64_t offset,
                                      absl::string_view where) {
  absl::StatusOr<int64_t> next = NextTFRecord(file, offset, where);
  if (!next.ok()) return next.status();
  const uint8_t* data = file.data() + offset + 12;
  const int64_t n = *next - offset - 16;
  if (static_cast<uint32_t>(LoadLittle(data + n, 4)) != MaskedCrc32c(View(data, n))) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the TFRecord at byte offset %d: the CRC of its bytes does not match: a damaged "
        "record", where, offset));
  }
  return TFRecord{std::string(View(data, n)), *next};
}

std::string EncodeTFRecord(absl::string_view payload) {
  std::string out;
  AppendLittle(payload.size(), 8, &out);
  AppendLittle(MaskedCrc32c(out), 4, &out);
  out.append(payload.data(), payload.size());
  AppendLittle(MaskedCrc32c(payload), 4, &out);
  return out;
}

absl::StatusOr<ImageExample> DecodeImageExample(absl::string_view payload, int64_t label_base,
                                                absl::string_view where) {
  tfexample::Example example;
  if (!example.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError(absl::StrFormat(
        "%s: a record that is not a tf.train.Example (%d bytes)", where, payload.size()));
  }
  const auto& features = example.features().feature();
  const auto image = features.find(kImageKey);
  const auto label = features.find(kLabelKey);
  if (image == features.end() || image->second.bytes_list().value_size() != 1) {
    return absl::DataLossError(absl::StrFormat(
        "%s: an Example without one '%s' (bytes): not an image record", where, kImageKey));
  }
  if (label == features.end() || label->second.int64_list().value_size() != 1) {
    return absl::DataLossError(absl::StrFormat(
        "%s: an Example without one '%s' (int64): no label", where, kLabelKey));
  }
  ImageExample out{image->second.bytes_list().value(0),
                   label->second.int64_list().value(0) - label_base};
  if (out.label < 0) {
    return absl::DataLossError(absl::StrFormat(
        "%s: label %d read as %d, below 0: does the file count its classes from 0? (then read it "
        "with labels from 0)",
        where, out.label + label_base, out.label));
  }
  return out;
}

std::string EncodeImageExample(absl::string_view image, int64_t stored_label) {
  tfexample::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  features[kImageKey].mutable_bytes_list()->add_value(std::string(image));
  features[kLabelKey].mutable_int64_list()->add_value(stored_label);
  std::string out;
  example.SerializeToString(&out);
  return out;
}

}  // namespace cohort
