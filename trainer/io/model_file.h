#ifndef COHORT_TRAINER_IO_MODEL_FILE_H_
#define COHORT_TRAINER_IO_MODEL_FILE_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "trainer/nn/model.h"

namespace cohort {

// Exports a model's parameters and state as safetensors (Contracts): names "<layer>.weight|bias"
// and "<bn>.running_mean|running_var" in model order, PyTorch layouts, F32, and metadata with the model name and input shape "[C,H,W]" plus
// the extra entries given (e.g. input_mean, input_std).
// There is no "<bn>.num_batches_tracked": PyTorch's batch norm takes a state dict without its
// version metadata, as a safetensors file gives, as one from before that counter and sets it to
// 0, also under load_state_dict(strict=True); it counts steps only for momentum=None.
// parameter_values, when given, are written in place of the parameters' own values (one per
// parameter in model order, F32 on the host: the kvstore's master weights of a model that
// computes in 16 bits).
absl::Status SaveModel(const Model& model, const std::map<std::string, std::string>& extra_metadata,
                       const std::string& path,
                       const std::vector<Tensor>* parameter_values = nullptr);

// Loads parameters and state written by SaveModel into a model of the same architecture: every name must
// be present with the model's shape and nothing else may be in the file.
absl::Status LoadModel(const std::string& path, Model* model);

}  // namespace cohort

#endif  // COHORT_TRAINER_IO_MODEL_FILE_H_
