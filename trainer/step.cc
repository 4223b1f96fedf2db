#include "trainer/step.h"

#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status InitKVStore(const Model& model, KVStore* kvstore) {
  const auto& params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    RETURN_IF_ERROR(kvstore->Init(static_cast<int64_t>(k), params[k]->value));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> TrainStep(Model* model, SoftmaxCrossEntropyLoss* loss, KVStore* kvstore,
                                 const Tensor& images, const Tensor& labels) {
  const double value = loss->Forward(model->Forward(Mode::kTrain, images), labels);
  model->Backward(loss->Backward());
  const auto& params = model->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    RETURN_IF_ERROR(
        kvstore->PushPull(static_cast<int64_t>(k), params[k]->grad, &params[k]->value));
  }
  return value;
}

}  // namespace cohort
