#include "trainer/io/safetensors.h"

#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace cohort {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<DType> ParseDType(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  return absl::InvalidArgumentError(absl::StrCat("dtype \"", s, "\" is not F32, BF16 or F16"));
}

}  // namespace

std::string EncodeSafetensors(absl::Span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  header["__metadata__"] = Json(metadata);
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    COHORT_CHECK(t.tensor->device().kind == Device::Kind::kCpu, "%s is on %s", t.name.c_str(),
                 t.tensor->device().ToString().c_str());
    COHORT_CHECK(ParseDType(std::string(DTypeName(t.tensor->dtype()))).ok(),
                 "%s has dtype %s, not exportable", t.name.c_str(),
                 std::string(DTypeName(t.tensor->dtype())).c_str());
    header[t.name] = {{"dtype", std::string(DTypeName(t.tensor->dtype()))},
                      {"shape", t.tensor->shape().dims()},
                      {"data_offsets", {offset, offset + t.tensor->nbytes()}}};
    offset += t.tensor->nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string bytes;
  bytes.reserve(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(uint64_t{text.size()} >> (8 * i)));
  bytes += text;
  for (const NamedTensor& t : tensors) {
    bytes.append(static_cast<const char*>(t.tensor->raw()), t.tensor->nbytes());
  }
  return bytes;
}

absl::Status WriteSafetensors(const std::string& path, absl::Span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata) {
  const std::string bytes = EncodeSafetensors(tensors, metadata);
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", tmp, " failed (disk full?)"));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return DecodeSafetensors(bytes, path);
}

absl::StatusOr<SafetensorsFile> DecodeSafetensors(absl::string_view bytes,
                                                  absl::string_view where) {
  auto fail = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a valid safetensors file: ", what));
  };
  if (bytes.size() < 8) return fail("shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_len > bytes.size() - 8) {
    return fail(absl::StrCat("header length ", header_len, " exceeds the file (", bytes.size(),
                             " bytes)"));
  }
  const Json header = Json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len, nullptr,
                                 /*allow_exceptions=*/false);
  if (!header.is_object()) return fail("the header is not a JSON object");
  const size_t data_start = 8 + header_len;
  const size_t data_size = bytes.size() - data_start;

  SafetensorsFile file;
  uint64_t expected_begin = 0;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const Json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) return fail("__metadata__ is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string()) return fail(absl::StrCat("metadata ", m.key(), " is not a string"));
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = absl::StrCat("tensor ", name, ": ");
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets") || !entry["dtype"].is_string() ||
        !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      return fail(where + "needs dtype, shape and data_offsets [begin, end]");
    }
    auto dtype = ParseDType(entry["dtype"].get<std::string>());
    if (!dtype.ok()) return fail(where + std::string(dtype.status().message()));
    std::vector<int64_t> dims;
    for (const Json& d : entry["shape"]) {
      if (!d.is_number_unsigned()) return fail(where + "shape holds a non-negative integer only");
      dims.push_back(d.get<int64_t>());
    }
    const Json& off = entry["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return fail(where + "data_offsets are not non-negative integers");
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    Tensor t(Shape(dims), *dtype);
    if (begin != expected_begin) {
      return fail(absl::StrCat(where, "begins at ", begin, ", the previous tensor ends at ",
                               expected_begin, " (gap or overlap)"));
    }
    if (end < begin || end - begin != t.nbytes()) {
      return fail(absl::StrCat(where, "holds ", end - begin, " bytes, shape ", t.shape().ToString(),
                               " of ", entry["dtype"].get<std::string>(), " needs ", t.nbytes()));
    }
    if (end > data_size) {
      return fail(absl::StrCat(where, "ends at ", end, ", past the data (", data_size, " bytes)"));
    }
    if (t.nbytes() > 0) std::memcpy(t.raw(), bytes.data() + data_start + begin, t.nbytes());
    expected_begin = end;
    file.names.push_back(name);
    file.tensors.push_back(std::move(t));
  }
  if (expected_begin != data_size) {
    return fail(absl::StrCat(data_size - expected_begin, " bytes after the last tensor"));
  }
  return file;
}

}  // namespace cohort
