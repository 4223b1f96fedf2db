#include "trainer/step.h"

#include <chrono>

#include "trainer/base/status_macros.h"

namespace cohort {

absl::Status InitKVStore(const Model& model, KVStore* kvstore) {
  const auto& params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    RETURN_IF_ERROR(kvstore->Init(static_cast<int64_t>(k), params[k]->value));
  }
  for (size_t k = 0; k < params.size(); ++k) {
    RETURN_IF_ERROR(kvstore->Pull(static_cast<int64_t>(k), &params[k]->value));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> TrainStep(Model* model, SoftmaxCrossEntropyLoss* loss,
                                     KVStore* kvstore, const Tensor& images,
                                     const Tensor& labels) {
  using Clock = std::chrono::steady_clock;
  StepResult result;
  result.loss = loss->Forward(model->Forward(Mode::kTrain, images), labels);
  model->Backward(loss->Backward());
  const auto comm_start = Clock::now();
  const auto& params = model->parameters();
  const int64_t n = static_cast<int64_t>(params.size());
  for (int64_t k = n - 1; k >= 0; --k) RETURN_IF_ERROR(kvstore->Push(k, params[k]->grad));
  for (int64_t k = 0; k < n; ++k) RETURN_IF_ERROR(kvstore->Pull(k, &params[k]->value));
  result.comm_seconds = std::chrono::duration<double>(Clock::now() - comm_start).count();
  return result;
}

}  // namespace cohort
