#include "tools/torchvision_check/model_logits.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "trainer/base/status_macros.h"
#include "trainer/io/model_file.h"
#include "trainer/io/safetensors.h"
#include "trainer/models/models.h"

namespace cohort {
namespace {

// "[3,64,64]", as SaveModel writes the sample shape.
absl::StatusOr<Shape> ParseInputShape(const std::string& path, absl::string_view text) {
  absl::string_view inner = text;
  std::vector<int64_t> dims;
  if (absl::ConsumePrefix(&inner, "[") && absl::ConsumeSuffix(&inner, "]")) {
    for (absl::string_view part : absl::StrSplit(inner, ',')) {
      int64_t d = 0;
      if (!absl::SimpleAtoi(part, &d) || d < 1) {
        dims.clear();
        break;
      }
      dims.push_back(d);
    }
  }
  if (dims.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": metadata input_shape \"", text, "\" is not [C,H,W,...]"));
  }
  return Shape(dims);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadExportedModel(const std::string& path,
                                                         Backend* backend) {
  ASSIGN_OR_RETURN(const SafetensorsFile file, ReadSafetensors(path));
  const auto model = file.metadata.find("model");
  const auto input_shape = file.metadata.find("input_shape");
  if (model == file.metadata.end() || input_shape == file.metadata.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no model or input_shape in the metadata: not a Cohort export"));
  }
  ASSIGN_OR_RETURN(const Shape sample, ParseInputShape(path, input_shape->second));
  if (file.tensors.empty() || file.tensors.back().shape().rank() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the last tensor is not a classifier's bias (K), so the classes are unknown"));
  }
  const int num_classes = static_cast<int>(file.tensors.back().shape()[0]);
  auto built = BuildModel(model->second, backend, sample, num_classes);
  if (!built.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", built.status().message()));
  }
  RETURN_IF_ERROR(LoadModel(path, built->get()));
  return built;
}

absl::StatusOr<Tensor> ReadRawImages(const std::string& path, const Shape& sample) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t sample_bytes = static_cast<size_t>(sample.numel()) * sizeof(float);
  if (bytes.empty() || bytes.size() % sample_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", bytes.size(),
                                                   " bytes are not a whole number of ",
                                                   sample.ToString(), " float32 images"));
  }
  std::vector<int64_t> dims{static_cast<int64_t>(bytes.size() / sample_bytes)};
  dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
  Tensor images{Shape(dims)};
  std::memcpy(images.raw(), bytes.data(), bytes.size());
  return images;
}

absl::Status WriteRawFloats(const std::string& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  out.close();
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace cohort
