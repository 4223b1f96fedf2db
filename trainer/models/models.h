#ifndef COHORT_TRAINER_MODELS_MODELS_H_
#define COHORT_TRAINER_MODELS_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/nn/model.h"

namespace cohort {

// The model names --model accepts.
std::vector<std::string> ModelNames();

// Builds a named model on the backend for samples of input_shape (C, H, W) and num_classes.
// Parameters are zero until Model::InitParameters. Unknown names are an InvalidArgument
// listing the known ones.
//   lenet: LeNet-5 with ReLU and max pooling: conv1 6@5x5 pad 2, pool 2, conv2 16@5x5, pool 2,
//          fc1 120, fc2 84, fc3 num_classes.
//   mlp:   flatten, fc1 256, fc2 128, fc3 num_classes, ReLU between.
absl::StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name, Backend* backend,
                                                  const Shape& input_shape, int num_classes);

}  // namespace cohort

#endif  // COHORT_TRAINER_MODELS_MODELS_H_
