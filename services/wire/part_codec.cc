#include "services/wire/part_codec.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

v1::DType ToProto(WireEncoding e) {
  switch (e) {
    case WireEncoding::kF32: return v1::F32;
    case WireEncoding::kF16: return v1::F16;
    case WireEncoding::kBF16: return v1::BF16;
    case WireEncoding::kTwoBit: return v1::TWO_BIT;
  }
  return v1::DTYPE_UNSPECIFIED;
}

void FillHeader(const PartHeader& p, size_t bytes, v1::PartHeader* h) {
  h->set_key(p.id.key);
  h->set_part(p.id.part);
  h->set_version(p.version);
  h->set_generation(p.generation);
  h->set_dtype(ToProto(p.encoding));
  h->set_bytes(static_cast<int64_t>(bytes));
  h->set_rank(p.rank);
  h->set_threshold(p.threshold);
  if (p.lr >= 0) {
    h->set_lr(p.lr);
  } else {
    h->clear_lr();
  }
}

// The header's fields, or InvalidArgument naming the part when they do not fit data_bytes.
absl::StatusOr<PartHeader> CheckedHeader(const v1::PartHeader& h, size_t data_bytes) {
  const auto where = [&] {
    return absl::StrCat(h.rank() >= 0 ? absl::StrCat("worker ", h.rank(), "'s ") : "", "key ",
                        h.key(), " part ", h.part());
  };
  PartHeader out{PartId{h.key(), h.part()}, h.version(), h.rank(), h.generation()};
  size_t unit = 1;  // bytes of whole values
  switch (h.dtype()) {
    case v1::F32: out.encoding = WireEncoding::kF32; unit = 4; break;
    case v1::F16: out.encoding = WireEncoding::kF16; unit = 2; break;
    case v1::BF16: out.encoding = WireEncoding::kBF16; unit = 2; break;
    case v1::TWO_BIT: out.encoding = WireEncoding::kTwoBit; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(where(), ": dtype ", v1::DType_Name(h.dtype()),
                                                     "; expected F32, F16, BF16 or TWO_BIT"));
  }
  out.threshold = h.threshold();
  if (out.encoding == WireEncoding::kTwoBit && !(out.threshold > 0 && out.threshold < 1e30f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": 2-bit values with threshold ", out.threshold));
  }
  out.lr = h.has_lr() ? h.lr() : -1;
  if (h.has_lr() && !(out.lr >= 0 && out.lr < 1e30f)) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": learning rate ", out.lr));
  }
  if (h.generation() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": membership generation ", h.generation(), " (never negative)"));
  }
  if (h.bytes() != static_cast<int64_t>(data_bytes) || h.bytes() % unit != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": header says ", h.bytes(),
                                                   " bytes, the message carries ", data_bytes,
                                                   " (or not whole values)"));
  }
  return out;
}

// Protobuf wire format: a field's tag byte and base-128 varints.
constexpr unsigned char kField1 = (1 << 3) | 2;  // length-delimited: a batch's part, a header
constexpr unsigned char kField2 = (2 << 3) | 2;  // length-delimited: a part's data
constexpr size_t kMaxVarint = 10;
constexpr size_t kMaxHeader = 128;  // a PartHeader's eight fields take at most 64 bytes

size_t PutVarint(uint64_t v, unsigned char* out) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<unsigned char>(v);
  return n;
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void Unpin(void* pin) { static_cast<PinCount*>(pin)->Unpin(); }

bool Aliased(const OutgoingPart& p) {
  return p.pin != nullptr && p.header.encoding == WireEncoding::kF32 &&
         p.values.size() * sizeof(float) >= kAliasBytes;
}

// One part's framing: everything before its data's bytes.
struct Framing {
  unsigned char bytes[3 * kMaxVarint + 3 + kMaxHeader];
  size_t size = 0;
  size_t data_bytes = 0;
};

Framing Frame(const OutgoingPart& p) {
  Framing f;
  f.data_bytes = EncodedBytes(p.header.encoding, p.values.size());
  v1::PartHeader h;
  FillHeader(p.header, f.data_bytes, &h);
  const size_t header_bytes = h.ByteSizeLong();
  size_t part_bytes = 1 + VarintSize(header_bytes) + header_bytes;
  if (f.data_bytes > 0) part_bytes += 1 + VarintSize(f.data_bytes) + f.data_bytes;
  unsigned char* out = f.bytes;
  *out++ = kField1;  // PartBatch.parts
  out += PutVarint(part_bytes, out);
  *out++ = kField1;  // Part.header
  out += PutVarint(header_bytes, out);
  out = h.SerializeWithCachedSizesToArray(out);
  if (f.data_bytes > 0) {
    *out++ = kField2;  // Part.data
    out += PutVarint(f.data_bytes, out);
  }
  f.size = out - f.bytes;
  return f;
}

}  // namespace

// Reads a message's bytes in order across its chunks.
class ChunkCursor {
 public:
  explicit ChunkCursor(ByteChunks chunks) : chunks_(chunks), total_(TotalBytes(chunks)) {}
  size_t position() const { return position_; }
  size_t total() const { return total_; }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      unsigned char c;
      if (!Copy(1, &c)) return false;
      *v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if ((c & 0x80) == 0) return true;
    }
    return false;
  }
  bool Copy(size_t n, void* out) {
    return Read(n, [&](const char* p, size_t k, size_t done) {
      std::memcpy(static_cast<char*>(out) + done, p, k);
    });
  }
  // The next n bytes as views into the chunks.
  bool Take(size_t n, std::vector<absl::Span<const char>>* chunks) {
    return Read(n, [&](const char* p, size_t k, size_t) { chunks->emplace_back(p, k); });
  }

 private:
  template <typename Fn>
  bool Read(size_t n, Fn fn) {
    if (n > total_ - position_) return false;
    size_t done = 0;
    while (done < n) {
      const absl::Span<const char> c = chunks_[chunk_];
      const size_t k = std::min(n - done, c.size() - offset_);
      if (k > 0) fn(c.data() + offset_, k, done);
      done += k;
      offset_ += k;
      if (offset_ == c.size()) {
        ++chunk_;
        offset_ = 0;
      }
    }
    position_ += n;
    return true;
  }

  const ByteChunks chunks_;
  const size_t total_;
  size_t position_ = 0;
  size_t chunk_ = 0;
  size_t offset_ = 0;
};

void EncodePart(PartId id, int64_t version, int rank, absl::Span<const float> values,
                v1::Part* out) {
  FillHeader(PartHeader{id, version, rank}, values.size() * sizeof(float), out->mutable_header());
  out->mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float));
}

absl::StatusOr<PartHeader> DecodePart(const v1::Part& part, std::vector<float>* out) {
  absl::StatusOr<PartHeader> header = CheckedHeader(part.header(), part.data().size());
  if (!header.ok()) return header.status();
  if (header->encoding != WireEncoding::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("key ", header->id.key, " part ",
                                                   header->id.part, ": ",
                                                   WireEncodingName(header->encoding),
                                                   " values where only F32 is taken"));
  }
  out->resize(part.data().size() / sizeof(float));
  if (!out->empty()) std::memcpy(out->data(), part.data().data(), part.data().size());
  return header;
}

namespace {

// One message's bytes laid out in order: the framing, and the values of parts that
// `referenced` does not pick, are written at out (CopiedBytes of them); `copied(begin, end)`
// gets each run of out between referenced values, `values(i)` each referenced part, in order.
template <typename Referenced>
size_t CopiedBytes(absl::Span<const OutgoingPart> parts, const std::vector<Framing>& framings,
                   Referenced referenced) {
  size_t copied = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    copied += framings[i].size + (referenced(parts[i]) ? 0 : framings[i].data_bytes);
  }
  return copied;
}

template <typename Referenced, typename Copied, typename Values>
void LayOut(absl::Span<const OutgoingPart> parts, const std::vector<Framing>& framings,
            Referenced referenced, char* out, Copied copied, Values values) {
  char* piece = out;  // where the current run of out begins
  for (size_t i = 0; i < parts.size(); ++i) {
    const OutgoingPart& p = parts[i];
    std::memcpy(out, framings[i].bytes, framings[i].size);
    out += framings[i].size;
    if (referenced(p)) {
      copied(piece, out);
      piece = out;
      values(i);
    } else {
      EncodeValues(p.header.encoding, p.values, p.header.threshold, p.residual, out);
      out += framings[i].data_bytes;
    }
  }
  if (out > piece) copied(piece, out);
}

std::vector<Framing> Frames(absl::Span<const OutgoingPart> parts) {
  std::vector<Framing> framings;
  framings.reserve(parts.size());
  for (const OutgoingPart& p : parts) framings.push_back(Frame(p));
  return framings;
}

}  // namespace

grpc::ByteBuffer SerializeBatch(absl::Span<const OutgoingPart> parts) {
  // Copied bytes go into one buffer; an aliased part's values into a slice of their own, between
  // the buffer's pieces.
  const std::vector<Framing> framings = Frames(parts);
  grpc::Slice buffer(CopiedBytes(parts, framings, Aliased));
  // A fresh slice's bytes are this function's alone until it is handed over.
  char* const start = reinterpret_cast<char*>(const_cast<unsigned char*>(buffer.begin()));
  std::vector<grpc::Slice> slices;
  LayOut(
      parts, framings, Aliased, start,
      [&](char* begin, char* end) { slices.push_back(buffer.sub(begin - start, end - start)); },
      [&](size_t i) {
        const OutgoingPart& p = parts[i];
        p.pin->Pin();  // the slice's, released by gRPC once written
        slices.emplace_back(const_cast<float*>(p.values.data()), framings[i].data_bytes, &Unpin,
                            p.pin);
      });
  for (const OutgoingPart& p : parts) {
    if (p.pin != nullptr) p.pin->Unpin();
  }
  if (slices.empty()) slices.push_back(buffer.sub(0, 0));
  return grpc::ByteBuffer(slices.data(), slices.size());
}

void LayOutBatch(absl::Span<const OutgoingPart> parts, std::string* scratch,
                 std::vector<absl::Span<const char>>* pieces) {
  const auto f32 = [](const OutgoingPart& p) { return p.header.encoding == WireEncoding::kF32; };
  const std::vector<Framing> framings = Frames(parts);
  scratch->resize(CopiedBytes(parts, framings, f32));  // sized once: pieces point into it
  pieces->clear();
  LayOut(
      parts, framings, f32, scratch->data(),
      [&](char* begin, char* end) { pieces->emplace_back(begin, end - begin); },
      [&](size_t i) {
        pieces->emplace_back(reinterpret_cast<const char*>(parts[i].values.data()),
                             framings[i].data_bytes);
      });
}

absl::Status ReceivedBatch::Parse(grpc::ByteBuffer* message) {
  Clear();
  if (!message->Dump(&slices_).ok()) {
    return absl::InvalidArgumentError("an unreadable part message");
  }
  message->Clear();
  for (const grpc::Slice& s : slices_) {
    slice_chunks_.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return ParseChunks(slice_chunks_);
}

absl::Status ReceivedBatch::Parse(ByteChunks message) {
  Clear();
  return ParseChunks(message);
}

absl::Status ReceivedBatch::ParseChunks(ByteChunks message) {
  ChunkCursor in(message);
  while (in.position() < in.total()) {
    unsigned char tag;
    uint64_t length;
    if (!in.Copy(1, &tag) || tag != kField1 || !in.Varint(&length) ||
        length > in.total() - in.position()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a message of ", in.total(), " bytes that is not a cohort.v1.PartBatch (at byte ",
          in.position(), ")"));
    }
    if (absl::Status s = ParsePart(&in, in.position() + length); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReceivedBatch::ParsePart(ChunkCursor* in, size_t end) {
  Received r;
  r.first_chunk = chunks_.size();
  bool has_header = false;
  size_t data_bytes = 0;
  const auto malformed = [&] {
    return absl::InvalidArgumentError(absl::StrCat("part ", parts_.size(), " of a ", in->total(),
                                                   "-byte message is not a cohort.v1.Part"));
  };
  while (in->position() < end) {
    unsigned char tag;
    uint64_t length;
    if (!in->Copy(1, &tag) || !in->Varint(&length) || length > end - in->position()) {
      return malformed();
    }
    if (tag == kField1) {
      unsigned char header[kMaxHeader];
      if (length > sizeof(header) || !in->Copy(length, header) ||
          !wire_header_.ParseFromArray(header, static_cast<int>(length))) {
        return malformed();
      }
      has_header = true;
    } else if (tag == kField2) {
      // A repeated field's last occurrence counts, as protobuf reads it.
      chunks_.resize(r.first_chunk);
      if (!in->Take(length, &chunks_)) return malformed();
      data_bytes = length;
    } else {
      return malformed();
    }
  }
  if (!has_header) wire_header_.Clear();
  absl::StatusOr<PartHeader> header = CheckedHeader(wire_header_, data_bytes);
  if (!header.ok()) return header.status();
  r.header = *header;
  r.num_chunks = chunks_.size() - r.first_chunk;
  parts_.push_back(r);
  return absl::OkStatus();
}

void ReceivedBatch::Clear() {
  slices_.clear();
  slice_chunks_.clear();
  chunks_.clear();
  parts_.clear();
}

}  // namespace cohort
