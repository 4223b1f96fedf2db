#include "services/common/part_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort {

void EncodePart(PartId id, int64_t version, int rank, absl::Span<const float> values,
                v1::Part* out) {
  v1::PartHeader* h = out->mutable_header();
  h->set_key(id.key);
  h->set_part(id.part);
  h->set_version(version);
  h->set_generation(0);
  h->set_dtype(v1::F32);
  h->set_bytes(static_cast<int64_t>(values.size() * sizeof(float)));
  h->set_rank(rank);
  out->mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float));
}

absl::StatusOr<DecodedPart> DecodePart(const v1::Part& part, std::vector<float>* out) {
  const v1::PartHeader& h = part.header();
  const auto where = [&] { return absl::StrCat("key ", h.key(), " part ", h.part()); };
  if (h.dtype() != v1::F32) {
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ": dtype ", v1::DType_Name(h.dtype()), "; only F32 is supported"));
  }
  if (h.generation() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": membership generation ",
                                                   h.generation(), "; this job has only 0"));
  }
  if (h.bytes() != static_cast<int64_t>(part.data().size()) || h.bytes() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ": header says ", h.bytes(),
                                                   " bytes, the message carries ",
                                                   part.data().size(), " (or not whole floats)"));
  }
  out->resize(part.data().size() / sizeof(float));
  std::memcpy(out->data(), part.data().data(), part.data().size());
  return DecodedPart{PartId{h.key(), h.part()}, h.version(), h.rank()};
}

}  // namespace cohort
