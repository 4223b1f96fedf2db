#ifndef COHORT_TOOLS_TORCHVISION_CHECK_MODEL_LOGITS_H_
#define COHORT_TOOLS_TORCHVISION_CHECK_MODEL_LOGITS_H_

// What //tools/torchvision_check:model_logits needs to give Cohort's own logits for an exported
// model, to hold them against another framework's (torchvision_check_test.py).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/nn/model.h"

namespace cohort {

// The model a SaveModel file holds, rebuilt from the file alone on `backend`: its metadata names
// the model and the sample shape ("model", "input_shape"), and the classifier's bias, the last
// tensor of every model's export, gives the classes. Errors name the file.
absl::StatusOr<std::unique_ptr<Model>> LoadExportedModel(const std::string& path,
                                                         Backend* backend);

// Images (N, C, H, W) from a file of raw little-endian float32s, N·C·H·W of them in that order;
// sample is (C, H, W). A size that is not a whole number of samples is an error.
absl::StatusOr<Tensor> ReadRawImages(const std::string& path, const Shape& sample);

// t's values (F32 on the host) as raw little-endian float32s, replacing the file.
absl::Status WriteRawFloats(const std::string& path, const Tensor& t);

}  // namespace cohort

#endif  // COHORT_TOOLS_TORCHVISION_CHECK_MODEL_LOGITS_H_
