#include "services/wire/row_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort {

void EncodeRows(const TableRowsHeader& header, absl::Span<const uint64_t> ids,
                absl::Span<const float> values, v1::TableRows* out) {
  out->set_table(header.table);
  out->set_step(header.step);
  out->set_rank(header.rank);
  out->set_generation(header.generation);
  out->set_dim(static_cast<int32_t>(header.dim));
  out->mutable_ids()->Assign(ids.begin(), ids.end());
  out->mutable_values()->assign(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float));
}

absl::StatusOr<TableRowsHeader> DecodeRows(const v1::TableRows& message, std::vector<uint64_t>* ids,
                                           std::vector<float>* values) {
  const TableRowsHeader header{message.table(), message.step(), message.rank(),
                               message.generation(), message.dim()};
  const std::string where = absl::StrCat("rows of table ", header.table, " from worker ",
                                         header.rank, " for step ", header.step);
  const int64_t n = message.ids_size();
  if (header.dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rows of ", header.dim, " floats"));
  }
  for (int64_t i = 1; i < n; ++i) {
    if (message.ids(i - 1) >= message.ids(i)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": id ", message.ids(i), " at ", i,
                                                     " after ", message.ids(i - 1),
                                                     "; a message's ids are ascending, each once"));
    }
  }
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(header.dim) * sizeof(float);
  if (message.values().size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", message.values().size(),
                                                   " bytes of values for ", n, " rows of ",
                                                   header.dim, " F32 (", bytes, " bytes)"));
  }
  ids->assign(message.ids().begin(), message.ids().end());
  values->resize(bytes / sizeof(float));
  if (bytes > 0) std::memcpy(values->data(), message.values().data(), bytes);
  return header;
}

}  // namespace cohort
