#include "trainer/io/model_file.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/base/status_macros.h"
#include "trainer/io/safetensors.h"

namespace cohort {

absl::Status SaveModel(const Model& model, const std::map<std::string, std::string>& extra_metadata,
                       const std::string& path, const std::vector<Tensor>* parameter_values) {
  std::map<const Tensor*, const Tensor*> replaced;
  if (parameter_values != nullptr) {
    COHORT_CHECK(parameter_values->size() == model.parameters().size(),
                 "%zu values for %zu parameters", parameter_values->size(),
                 model.parameters().size());
    for (size_t k = 0; k < parameter_values->size(); ++k) {
      replaced[&model.parameters()[k]->value] = &(*parameter_values)[k];
    }
  }
  const std::vector<StateTensor> exported = model.ExportedTensors();
  // Tensors on a device or in 16 bits are written as F32 host copies.
  std::vector<Tensor> copies;
  copies.reserve(exported.size());
  std::vector<NamedTensor> tensors;
  for (const StateTensor& t : exported) {
    const Tensor* value = t.value;
    if (auto it = replaced.find(value); it != replaced.end()) value = it->second;
    if (!IsHostTensorOf(*value, DType::kF32)) {
      copies.push_back(ToHost(*value, DType::kF32));
      value = &copies.back();
    }
    tensors.push_back({t.name, value});
  }
  std::map<std::string, std::string> metadata = extra_metadata;
  metadata["model"] = model.name();
  metadata["input_shape"] = absl::StrCat("[", absl::StrJoin(model.input_shape().dims(), ","), "]");
  return WriteSafetensors(path, tensors, metadata);
}

absl::Status LoadModel(const std::string& path, Model* model) {
  ASSIGN_OR_RETURN(SafetensorsFile file, ReadSafetensors(path));
  auto it = file.metadata.find("model");
  if (it != file.metadata.end() && it->second != model->name()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds a ", it->second, " model, not ",
                                                   model->name()));
  }
  std::map<std::string, const Tensor*> by_name;
  for (size_t i = 0; i < file.names.size(); ++i) by_name[file.names[i]] = &file.tensors[i];
  for (const StateTensor& want : model->ExportedTensors()) {
    auto found = by_name.find(want.name);
    if (found == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " has no tensor ", want.name));
    }
    const Tensor& t = *found->second;
    if (t.shape() != want.value->shape() || t.dtype() != want.value->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", want.name, " is ", DTypeName(t.dtype()), " ", t.shape().ToString(),
          ", the model needs ", DTypeName(want.value->dtype()), " ",
          want.value->shape().ToString()));
    }
    std::memcpy(want.value->raw(), t.raw(), t.nbytes());
    by_name.erase(found);
  }
  if (!by_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", by_name.begin()->first,
                                                   " is not a parameter of ", model->name()));
  }
  return absl::OkStatus();
}

}  // namespace cohort
