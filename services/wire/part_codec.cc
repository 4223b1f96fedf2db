#include "services/wire/part_codec.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

void FillHeader(PartId id, int64_t version, int rank, size_t bytes, v1::PartHeader* h,
                int64_t generation = 0) {
  h->set_key(id.key);
  h->set_part(id.part);
  h->set_version(version);
  h->set_generation(generation);
  h->set_dtype(v1::F32);
  h->set_bytes(static_cast<int64_t>(bytes));
  h->set_rank(rank);
}

PartHeader HeaderFields(const v1::PartHeader& h) {
  return PartHeader{PartId{h.key(), h.part()}, h.version(), h.rank(), h.generation()};
}

absl::Status CheckHeader(const v1::PartHeader& h, size_t data_bytes) {
  const auto where = [&] {
    return absl::StrCat(h.rank() >= 0 ? absl::StrCat("worker ", h.rank(), "'s ") : "", "key ",
                        h.key(), " part ", h.part());
  };
  if (h.dtype() != v1::F32) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": dtype ", v1::DType_Name(h.dtype()), "; only F32 is supported"));
  }
  if (h.generation() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": membership generation ", h.generation(), " (never negative)"));
  }
  if (h.bytes() != static_cast<int64_t>(data_bytes) || h.bytes() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": header says ", h.bytes(),
                                                   " bytes, the message carries ", data_bytes,
                                                   " (or not whole floats)"));
  }
  return absl::OkStatus();
}

// Protobuf wire format: a field's tag byte and base-128 varints.
constexpr unsigned char kHeaderTag = (1 << 3) | 2;  // field 1, length-delimited
constexpr unsigned char kDataTag = (2 << 3) | 2;    // field 2, length-delimited

size_t PutVarint(uint64_t v, unsigned char* out) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<unsigned char>(v);
  return n;
}

bool GetVarint(const unsigned char* b, size_t end, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; *pos < end && shift < 64; shift += 7) {
    const unsigned char c = b[(*pos)++];
    *v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) return true;
  }
  return false;
}

void Unpin(void* pin) { static_cast<PinCount*>(pin)->Unpin(); }

}  // namespace

void EncodePart(PartId id, int64_t version, int rank, absl::Span<const float> values,
                v1::Part* out) {
  FillHeader(id, version, rank, values.size() * sizeof(float), out->mutable_header());
  out->mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float));
}

absl::StatusOr<PartHeader> DecodePart(const v1::Part& part, std::vector<float>* out) {
  const absl::Status valid = CheckHeader(part.header(), part.data().size());
  if (!valid.ok()) return valid;
  out->resize(part.data().size() / sizeof(float));
  if (!out->empty()) std::memcpy(out->data(), part.data().data(), part.data().size());
  return HeaderFields(part.header());
}

grpc::ByteBuffer SerializePart(PartId id, int64_t version, int rank,
                               absl::Span<const float> values, PinCount* pin,
                               int64_t generation) {
  const size_t bytes = values.size() * sizeof(float);
  v1::PartHeader h;
  FillHeader(id, version, rank, bytes, &h, generation);
  // Tag, length and header (at most 7 varint fields), then the data field's tag and length.
  unsigned char prefix[128];
  size_t n = 0;
  prefix[n++] = kHeaderTag;
  n += PutVarint(h.ByteSizeLong(), prefix + n);
  n = h.SerializeWithCachedSizesToArray(prefix + n) - prefix;
  if (bytes > 0) {
    prefix[n++] = kDataTag;
    n += PutVarint(bytes, prefix + n);
  }
  if (bytes == 0) {
    grpc::Slice only(prefix, n);
    return grpc::ByteBuffer(&only, 1);
  }
  void* data = const_cast<float*>(values.data());
  if (pin != nullptr) pin->Pin();
  grpc::Slice slices[2] = {grpc::Slice(prefix, n),
                           pin != nullptr ? grpc::Slice(data, bytes, &Unpin, pin)
                                          : grpc::Slice(data, bytes)};
  return grpc::ByteBuffer(slices, 2);
}

absl::Status ReceivedPart::Parse(grpc::ByteBuffer* message) {
  Clear();
  if (!message->Dump(&slices_).ok()) {
    return absl::InvalidArgumentError("an unreadable part message");
  }
  message->Clear();
  size_t total = 0;
  for (const grpc::Slice& s : slices_) total += s.size();
  if (!ParseFast(total)) {
    std::string flat;
    flat.reserve(total);
    for (const grpc::Slice& s : slices_) {
      flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    slices_.clear();
    if (!fallback_.ParseFromString(flat)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a message of ", total, " bytes that is not a cohort.v1.Part"));
    }
    header_ = HeaderFields(fallback_.header());
    bytes_ = fallback_.data().size();
    if (bytes_ > 0) chunks_.push_back(absl::MakeConstSpan(fallback_.data()));
    return CheckHeader(fallback_.header(), bytes_);
  }
  header_ = HeaderFields(wire_header_);
  return CheckHeader(wire_header_, bytes_);
}

bool ReceivedPart::ParseFast(size_t total) {
  unsigned char b[160];
  size_t got = 0;
  for (const grpc::Slice& s : slices_) {
    const size_t take = std::min(s.size(), sizeof(b) - got);
    std::memcpy(b + got, s.begin(), take);
    got += take;
    if (got == sizeof(b)) break;
  }
  size_t pos = 0;
  uint64_t header_len = 0, data_len = 0;
  if (got == 0 || b[pos++] != kHeaderTag || !GetVarint(b, got, &pos, &header_len) ||
      header_len > got - pos || !wire_header_.ParseFromArray(b + pos, static_cast<int>(header_len))) {
    return false;
  }
  pos += header_len;
  if (pos < total) {
    if (pos >= got || b[pos++] != kDataTag || !GetVarint(b, got, &pos, &data_len) ||
        pos + data_len != total) {
      return false;
    }
  }
  bytes_ = data_len;
  size_t skip = pos;
  for (const grpc::Slice& s : slices_) {
    const char* p = reinterpret_cast<const char*>(s.begin());
    size_t n = s.size();
    if (skip >= n) {
      skip -= n;
      continue;
    }
    chunks_.emplace_back(p + skip, n - skip);
    skip = 0;
  }
  return true;
}

void ReceivedPart::Clear() {
  slices_.clear();
  chunks_.clear();
  bytes_ = 0;
}

}  // namespace cohort
