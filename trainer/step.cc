#include "trainer/step.h"

#include <chrono>

#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

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

StepRunner::StepRunner(Model* model, SoftmaxCrossEntropyLoss* loss, KVStore* kvstore,
                       bool overlap)
    : model_(model), loss_(loss), kvstore_(kvstore), overlap_(overlap) {
  const auto& params = model->parameters();
  for (size_t k = 0; k < params.size(); ++k) keys_[params[k]] = static_cast<int64_t>(k);
  in_flight_.assign(params.size(), 0);
  if (!overlap_) return;
  model->SetGradientReadyHook([this](Parameter& p) { Send(keys_.at(&p)); });
  model->SetBeforeForwardHook([this](int, Layer& layer) {
    for (Parameter& p : layer.parameters()) Receive(keys_.at(&p));
  });
}

StepRunner::~StepRunner() {
  if (!overlap_) return;
  model_->SetGradientReadyHook(nullptr);
  model_->SetBeforeForwardHook(nullptr);
}

void StepRunner::Send(int64_t key) {
  if (!status_.ok()) return;
  const auto start = Clock::now();
  Parameter* p = model_->parameters()[key];
  status_ = kvstore_->PushPull(key, p->grad, &p->value);
  in_flight_[key] = status_.ok();
  comm_seconds_ += SecondsSince(start);
}

void StepRunner::Receive(int64_t key) {
  if (!status_.ok() || !in_flight_[key]) return;
  const auto start = Clock::now();
  status_ = kvstore_->Wait(key);
  in_flight_[key] = 0;
  comm_seconds_ += SecondsSince(start);
}

absl::StatusOr<StepResult> StepRunner::Step(const Tensor& images, const Tensor& labels) {
  status_ = absl::OkStatus();
  comm_seconds_ = 0;
  StepResult result;
  result.loss = loss_->Forward(model_->Forward(Mode::kTrain, images), labels);
  RETURN_IF_ERROR(status_);  // a wait before some layer failed: this forward used stale values
  model_->Backward(loss_->Backward());
  if (!overlap_) {
    const int64_t n = static_cast<int64_t>(in_flight_.size());
    for (int64_t k = n - 1; k >= 0; --k) Send(k);
    for (int64_t k = 0; k < n; ++k) Receive(k);
  }
  RETURN_IF_ERROR(status_);
  result.comm_seconds = comm_seconds_;
  return result;
}

absl::Status StepRunner::WaitForParameters() {
  status_ = absl::OkStatus();
  for (size_t k = 0; k < in_flight_.size(); ++k) Receive(static_cast<int64_t>(k));
  return status_;
}

}  // namespace cohort
