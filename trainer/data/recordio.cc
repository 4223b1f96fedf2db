#include "trainer/data/recordio.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cohort {

namespace {

constexpr int kLengthBits = 29;
constexpr uint32_t kLengthMask = (1u << kLengthBits) - 1;
constexpr int64_t kHeaderBytes = 24;  // IRHeader

// Little-endian loads and stores (the format's byte order, whatever the host's).
uint32_t Load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint64_t Load64(const uint8_t* p) {
  return static_cast<uint64_t>(Load32(p)) | static_cast<uint64_t>(Load32(p + 4)) << 32;
}
void Append32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void Append64(uint64_t v, std::string* out) {
  Append32(static_cast<uint32_t>(v), out);
  Append32(static_cast<uint32_t>(v >> 32), out);
}
float LoadFloat(const uint8_t* p) {
  const uint32_t bits = Load32(p);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
void AppendFloat(float f, std::string* out) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  Append32(bits, out);
}

int64_t Padded(int64_t n) { return (n + 3) / 4 * 4; }

void AppendPart(absl::string_view bytes, uint32_t cflag, std::string* out) {
  Append32(kRecordIOMagic, out);
  Append32(cflag << kLengthBits | static_cast<uint32_t>(bytes.size()), out);
  out->append(bytes.data(), bytes.size());
  out->append(static_cast<size_t>(Padded(bytes.size()) - bytes.size()), '\0');
}

}  // namespace

absl::StatusOr<RecordIORecord> ReadRecordIO(absl::Span<const uint8_t> file, int64_t offset,
                                            absl::string_view where) {
  RecordIORecord record;
  const int64_t start = offset;
  const auto fail = [&](int64_t at, absl::string_view why) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the RecordIO record at byte offset %d%s: %s", where, start,
        at == start ? "" : absl::StrFormat(" (its part at %d)", at), why));
  };
  const int64_t size = static_cast<int64_t>(file.size());
  bool first = true;
  while (true) {
    if (offset < 0 || offset + 8 > size) {
      return fail(offset, absl::StrFormat("the file ends after %d bytes, inside a part's head",
                                          size));
    }
    const uint32_t magic = Load32(file.data() + offset);
    if (magic != kRecordIOMagic) {
      return fail(offset, absl::StrFormat("bad magic 0x%08x (a RecordIO record starts with "
                                          "0xced7230a): not a .rec file, or a wrong offset",
                                          magic));
    }
    const uint32_t word = Load32(file.data() + offset + 4);
    const uint32_t cflag = word >> kLengthBits;
    const int64_t length = word & kLengthMask;
    const int64_t end = offset + 8 + length;
    if (end > size) {
      return fail(offset, absl::StrFormat("the part holds %d bytes but the file ends %d bytes "
                                          "after its head: a truncated file",
                                          length, size - offset - 8));
    }
    // Parts go 0, or 1 2... 3.
    if (first ? (cflag == 2 || cflag == 3) : (cflag == 0 || cflag == 1)) {
      return fail(offset, absl::StrFormat("a part with flag %d %s", cflag,
                                          first ? "starts the record" : "continues a record"));
    }
    if (!first) Append32(kRecordIOMagic, &record.payload);
    record.payload.append(reinterpret_cast<const char*>(file.data() + offset + 8), length);
    const int64_t padded = std::min(size, offset + 8 + Padded(length));
    for (int64_t i = end; i < padded; ++i) {
      if (file[i] != 0) return fail(offset, "non-zero padding after the part");
    }
    offset = offset + 8 + Padded(length);
    first = false;
    if (cflag == 0 || cflag == 3) break;
  }
  record.next_offset = std::min(offset, size);
  return record;
}

std::string EncodeRecordIO(absl::string_view payload) {
  std::string out;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(payload.data());
  size_t part_start = 0;
  bool split = false;
  for (size_t i = 0; i + 4 <= payload.size(); i += 4) {
    if (Load32(bytes + i) != kRecordIOMagic) continue;
    AppendPart(payload.substr(part_start, i - part_start), split ? 2 : 1, &out);
    part_start = i + 4;
    split = true;
  }
  AppendPart(payload.substr(part_start), split ? 3 : 0, &out);
  return out;
}

absl::StatusOr<ImageRecord> DecodeImageRecord(absl::string_view payload,
                                              absl::string_view where) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(payload.data());
  const int64_t size = static_cast<int64_t>(payload.size());
  if (size < kHeaderBytes) {
    return absl::DataLossError(absl::StrFormat(
        "%s: an image record of %d bytes, shorter than its %d-byte header", where, size,
        kHeaderBytes));
  }
  ImageRecord record;
  const uint32_t flag = Load32(bytes);
  record.id = Load64(bytes + 8);
  record.id2 = Load64(bytes + 16);
  int64_t image_at = kHeaderBytes;
  if (flag == 0) {
    record.labels = {LoadFloat(bytes + 4)};
  } else {
    const int64_t label_bytes = 4 * static_cast<int64_t>(flag);
    if (size - kHeaderBytes < label_bytes) {
      return absl::DataLossError(absl::StrFormat(
          "%s: image record %d says it has %d labels, but only %d bytes follow its header",
          where, record.id, flag, size - kHeaderBytes));
    }
    for (uint32_t i = 0; i < flag; ++i) record.labels.push_back(LoadFloat(bytes + image_at + 4 * i));
    image_at += label_bytes;
  }
  record.image.assign(payload.data() + image_at, payload.size() - image_at);
  return record;
}

std::string EncodeImageRecord(const ImageRecord& record) {
  std::string out;
  const bool one = record.labels.size() == 1;
  Append32(one ? 0 : static_cast<uint32_t>(record.labels.size()), &out);
  AppendFloat(one ? record.labels[0] : 0.0f, &out);
  Append64(record.id, &out);
  Append64(record.id2, &out);
  if (!one) {
    for (float label : record.labels) AppendFloat(label, &out);
  }
  out += record.image;
  return out;
}

absl::StatusOr<std::vector<std::pair<uint64_t, int64_t>>> ParseRecordIOIndex(
    absl::string_view text, int64_t rec_size, absl::string_view where) {
  std::vector<std::pair<uint64_t, int64_t>> index;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint64_t id = 0;
    int64_t offset = 0;
    if (words.size() != 2 || !absl::SimpleAtoi(words[0], &id) ||
        !absl::SimpleAtoi(words[1], &offset)) {
      return absl::DataLossError(absl::StrFormat(
          "%s:%d: expected 'id<TAB>offset', as im2rec writes its .idx files", where,
          line_number));
    }
    if (offset < 0 || offset + 8 > rec_size) {
      return absl::DataLossError(absl::StrFormat(
          "%s:%d: record %d at byte offset %d, past the end of its .rec file (%d bytes): an "
          "index of another file?",
          where, line_number, id, offset, rec_size));
    }
    index.push_back({id, offset});
  }
  return index;
}

}  // namespace cohort
