#include "trainer/loop/step.h"

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "trainer/base/check.h"
#include "trainer/base/status_macros.h"

namespace cohort {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int64_t NumKeys(const std::vector<Replica>& replicas) {
  COHORT_CHECK(!replicas.empty(), "a step runner needs at least one replica");
  return static_cast<int64_t>(replicas[0].model->parameters().size());
}

int64_t StateElements(const Model& model) {
  int64_t n = 0;
  for (const StateTensor& t : model.state()) n += t.value->numel();
  return n;
}

// packed (StateElements): the model's state tensors one after another, in model order.
void PackState(const Model& model, float* packed) {
  for (const StateTensor& t : model.state()) {
    const Tensor& value = *t.value;
    if (IsHostTensorOf(value, DType::kF32)) {
      std::copy_n(value.data<float>(), value.numel(), packed);
    } else {
      const Tensor host = ToHost(value, DType::kF32);
      std::copy_n(host.data<float>(), host.numel(), packed);
    }
    packed += value.numel();
  }
}

void UnpackState(const float* packed, const Model& model) {
  for (const StateTensor& t : model.state()) {
    Tensor& value = *t.value;
    if (IsHostTensorOf(value, DType::kF32)) {
      std::copy_n(packed, value.numel(), value.data<float>());
    } else {
      Tensor host(value.shape());
      std::copy_n(packed, value.numel(), host.data<float>());
      value.CopyFrom(ConvertTo(host, value.dtype()));
    }
    packed += value.numel();
  }
}

}  // namespace

int64_t StateKey(const Model& model) {
  return model.state().empty() ? -1 : static_cast<int64_t>(model.parameters().size());
}

absl::Status InitKVStore(const Model& model, KVStore* kvstore) {
  const auto& params = model.parameters();
  // The kvstore holds F32 host values; a device's parameters go through host copies.
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor& value = params[k]->value;
    if (IsHostTensorOf(value, DType::kF32)) {
      RETURN_IF_ERROR(kvstore->Init(static_cast<int64_t>(k), value));
    } else {
      RETURN_IF_ERROR(kvstore->Init(static_cast<int64_t>(k), ToHost(value, DType::kF32)));
    }
  }
  const int64_t state_key = StateKey(model);
  if (state_key >= 0) {
    Tensor state(Shape{StateElements(model)});
    PackState(model, state.data<float>());
    RETURN_IF_ERROR(kvstore->InitAuxiliary(state_key, state));
  }
  // Every key is registered before the first pull (a distributed store commits on it).
  return PullKVStore(model, kvstore);
}

absl::Status PullKVStore(const Model& model, KVStore* kvstore) {
  const auto& params = model.parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor& value = params[k]->value;
    if (IsHostTensorOf(value, DType::kF32)) {
      RETURN_IF_ERROR(kvstore->Pull(static_cast<int64_t>(k), &value));
    } else {
      Tensor host(value.shape());
      RETURN_IF_ERROR(kvstore->Pull(static_cast<int64_t>(k), &host));
      value.CopyFrom(ConvertTo(host, value.dtype()));
    }
  }
  if (const int64_t state_key = StateKey(model); state_key >= 0) {
    Tensor state(Shape{StateElements(model)});
    RETURN_IF_ERROR(kvstore->Pull(state_key, &state));
    UnpackState(state.data<float>(), model);
  }
  return absl::OkStatus();
}

StepRunner::StepRunner(std::vector<Replica> replicas, KVStore* kvstore, bool overlap)
    : replicas_(std::move(replicas)),
      kvstore_(kvstore),
      overlap_(overlap),
      num_keys_(NumKeys(replicas_)),
      state_key_(StateKey(*replicas_[0].model)),
      exchange_state_(state_key_ >= 0 &&
                      (replicas_.size() > 1 || kvstore->mode() != KVStoreMode::kLocal)) {
  for (const Replica& replica : replicas_) {
    const auto& params = replica.model->parameters();
    COHORT_CHECK(static_cast<int64_t>(params.size()) == num_keys_, "replicas of different models");
    for (size_t k = 0; k < params.size(); ++k) keys_[params[k]] = static_cast<int64_t>(k);
  }
  {
    absl::MutexLock lock(&mu_);
    in_flight_.assign(num_keys_, 0);
    gradients_ready_.assign(num_keys_, 0);
    pulls_.assign(num_keys_, 0);
    copied_.assign(replicas_.size(), std::vector<int64_t>(num_keys_, 0));
    if (replicas_.size() > 1 && exchange_state_) {
      state_scratch_ = Tensor(Shape{StateElements(*replicas_[0].model)});
    }
    if (exchange_state_) {
      state_pushed_ = Tensor(Shape{StateElements(*replicas_[0].model)});
      state_pulled_ = Tensor(Shape{StateElements(*replicas_[0].model)});
    }
  }
  slices_.resize(replicas_.size());
  for (int r = 0; r < num_replicas(); ++r) {
    // Each replica uploads its slice from where its backend reads fastest (pinned, for a GPU).
    Allocator* host = replicas_[r].backend != nullptr ? replicas_[r].backend->host_allocator()
                                                      : CpuAllocator();
    slices_[r].images = Tensor(Shape{0}, DType::kF32, host);
    slices_[r].labels = Tensor(Shape{0}, DType::kI32, host);
  }
  gradient_scales_.assign(replicas_.size(), 1.0f);
  weights_.assign(replicas_.size(), 1.0f);
  if (num_replicas() > 1) {
    for (int r = 1; r < num_replicas(); ++r) {
      CopyParameters(0, r);
      CopyState(0, r);
    }
    team_ = std::make_unique<ThreadTeam>(num_replicas(), [this](int r) {
      if (replicas_[r].backend != nullptr) replicas_[r].backend->BindCallingThread();
    });
  }
  exchange_ = MakeExchange();
  if (!overlap_) return;
  for (int r = 0; r < num_replicas(); ++r) {
    Model* model = replicas_[r].model;
    model->SetGradientReadyHook([this, r](Parameter& p) { GradientReady(r, keys_.at(&p)); });
    model->SetBeforeForwardHook([this, r](int, Layer& layer) {
      for (Parameter& p : layer.parameters()) Receive(r, keys_.at(&p));
    });
  }
}

StepRunner::~StepRunner() {
  {
    // A failed step may leave exchanges in flight: the kvstore may still write into the
    // exchange's host values (a device's pinned buffers go with the exchange).
    absl::MutexLock lock(&mu_);
    for (int64_t k = 0; k < num_keys_; ++k) {
      if (in_flight_[k]) kvstore_->Wait(k).IgnoreError();
    }
    if (state_in_flight_) kvstore_->Wait(state_key_).IgnoreError();
  }
  team_.reset();
  if (!overlap_) return;
  for (const Replica& replica : replicas_) {
    replica.model->SetGradientReadyHook(nullptr);
    replica.model->SetBeforeForwardHook(nullptr);
  }
}

void StepRunner::CopyParameters(int from, int to) {
  const auto& src = replicas_[from].model->parameters();
  const auto& dst = replicas_[to].model->parameters();
  for (size_t k = 0; k < src.size(); ++k) dst[k]->value.CopyFrom(src[k]->value);
}

void StepRunner::CopyState(int from, int to) {
  const auto& src = replicas_[from].model->state();
  const auto& dst = replicas_[to].model->state();
  for (size_t s = 0; s < src.size(); ++s) dst[s].value->CopyFrom(*src[s].value);
}

void StepRunner::ForEachReplica(const std::function<void(int)>& fn) {
  if (team_ == nullptr) {
    fn(0);
  } else {
    team_->Run(fn);
  }
}

std::unique_ptr<ReplicaExchange> StepRunner::MakeExchange() {
  std::vector<std::vector<ParameterTensors>> tensors(replicas_.size());
  std::vector<Backend*> backends;
  for (int r = 0; r < num_replicas(); ++r) {
    for (Parameter* p : replicas_[r].model->parameters()) {
      tensors[r].push_back({&p->value, &p->grad});
    }
    backends.push_back(replicas_[r].backend);
  }
  if (num_replicas() > 1 && backends[0] != nullptr) {
    if (auto own = backends[0]->MakeReplicaExchange(backends, tensors)) return own;
  }
  // A device's exchange belongs to the device's thread (its events and buffers are made there).
  std::vector<std::unique_ptr<ParameterExchange>> each(replicas_.size());
  ForEachReplica([&](int r) {
    each[r] = backends[r] != nullptr ? backends[r]->MakeParameterExchange(std::move(tensors[r]))
                                     : MakeInPlaceExchange(std::move(tensors[r]));
  });
  return MakeHostReplicaExchange(std::move(each));
}

void StepRunner::GradientReady(int r, int64_t key) {
  absl::MutexLock lock(&mu_);
  if (!status_.ok()) return;
  // Replica r is done with this gradient: nobody touches it until its next backward.
  exchange_->GradientDone(r, key);
  if (++gradients_ready_[key] < num_replicas()) return;
  gradients_ready_[key] = 0;
  exchange_->Reduce(key, weights_);
  moving_.push_back(key);
  SendArrived(/*wait=*/false);
}

void StepRunner::SendArrived(bool wait) {
  // The sums land in the order they were started: stop at the first still moving.
  size_t sent = 0;
  while (sent < moving_.size() && (wait || exchange_->GradientArrived(moving_[sent]))) {
    Send(moving_[sent++]);
  }
  moving_.erase(moving_.begin(), moving_.begin() + static_cast<std::ptrdiff_t>(sent));
}

void StepRunner::Send(int64_t key) {
  if (!status_.ok()) return;
  // Waiting for a device's gradient is its backward, not communication: timed from here.
  const Tensor& grad = exchange_->HostGradient(key);
  Tensor* value = exchange_->HostValue(key);
  const auto start = Clock::now();
  status_ = kvstore_->PushPull(key, grad, value);
  in_flight_[key] = status_.ok();
  push_seconds_ += SecondsSince(start);
  pushed_bytes_ += static_cast<int64_t>(grad.nbytes());
}

void StepRunner::Receive(int r, int64_t key) {
  absl::MutexLock lock(&mu_);
  if (!status_.ok()) return;
  if (in_flight_[key]) {
    const auto start = Clock::now();
    status_ = kvstore_->Wait(key);
    in_flight_[key] = 0;
    pull_seconds_ += SecondsSince(start);
    if (!status_.ok()) return;
    ++pulls_[key];
    // The kvstore's values are F32, whatever the replica stores.
    pulled_bytes_ += static_cast<int64_t>(
        replicas_[0].model->parameters()[key]->value.numel() * sizeof(float));
  }
  // The kvstore wrote replica 0's host value; each replica takes it once per pull, on its own
  // thread (a device's upload is queued there).
  if (copied_[r][key] == pulls_[key]) return;
  copied_[r][key] = pulls_[key];
  exchange_->ReceiveValue(r, key);
}

void StepRunner::SendState() {
  if (!exchange_state_ || !status_.ok()) return;
  float* mean = state_pushed_.data<float>();
  PackState(*replicas_[0].model, mean);
  if (num_replicas() > 1) {
    // Summed in replica order.
    const int64_t n = state_pushed_.numel();
    for (int r = 1; r < num_replicas(); ++r) {
      float* v = state_scratch_.data<float>();
      PackState(*replicas_[r].model, v);
      for (int64_t i = 0; i < n; ++i) mean[i] += v[i];
    }
    const float scale = 1.0f / static_cast<float>(num_replicas());
    for (float& v : state_pushed_.span<float>()) v *= scale;
  }
  const auto start = Clock::now();
  status_ = kvstore_->PushPull(state_key_, state_pushed_, &state_pulled_);
  state_in_flight_ = status_.ok();
  push_seconds_ += SecondsSince(start);
  pushed_bytes_ += static_cast<int64_t>(state_pushed_.nbytes());
}

void StepRunner::ReceiveState() {
  if (!state_in_flight_ || !status_.ok()) return;
  const auto start = Clock::now();
  status_ = kvstore_->Wait(state_key_);
  state_in_flight_ = false;
  pull_seconds_ += SecondsSince(start);
  if (!status_.ok()) return;
  pulled_bytes_ += static_cast<int64_t>(state_pulled_.nbytes());
  for (const Replica& replica : replicas_) UnpackState(state_pulled_.data<float>(), *replica.model);
}

double StepRunner::CommSecondsSoFar() {
  absl::MutexLock lock(&mu_);
  return push_seconds_ + pull_seconds_;
}

void StepRunner::RunReplica(int r, const Tensor& images, const Tensor& labels) {
  const Replica& replica = replicas_[r];
  Slice& slice = slices_[r];
  if (const float scale = exchange_->BeginStep(r); scale != gradient_scales_[r]) {
    replica.loss->set_gradient_scale(scale);
    gradient_scales_[r] = scale;
  }
  const auto start = Clock::now();
  const double comm_before = CommSecondsSoFar();
  slice.loss = replica.loss->Forward(replica.model->Forward(Mode::kTrain, images), labels);
  const double comm_after_forward = CommSecondsSoFar();
  slice.forward_seconds = std::max(0.0, SecondsSince(start) - (comm_after_forward - comm_before));
  {
    absl::MutexLock lock(&mu_);
    if (!status_.ok()) return;  // a wait before some layer failed: this forward used stale values
  }
  const auto backward_start = Clock::now();
  replica.model->Backward(replica.loss->Backward());
  slice.backward_seconds = std::max(
      0.0, SecondsSince(backward_start) - (CommSecondsSoFar() - comm_after_forward));
}

absl::StatusOr<StepResult> StepRunner::Step(const Tensor& images, const Tensor& labels) {
  const int64_t batch = images.shape()[0];
  if (batch < num_replicas()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a local batch of ", batch, " cannot be split over ", num_replicas(),
        " device contexts; raise --batch_size or use fewer --devices"));
  }
  {
    absl::MutexLock lock(&mu_);
    status_ = absl::OkStatus();
    push_seconds_ = pull_seconds_ = 0;
    pushed_bytes_ = pulled_bytes_ = 0;
    for (int& ready : gradients_ready_) ready = 0;
    ReceiveState();  // the last step's statistics, before this step's forward updates them
  }
  if (num_replicas() == 1) {
    RunReplica(0, images, labels);
  } else {
    int64_t first = 0;
    for (int r = 0; r < num_replicas(); ++r) {
      const int64_t rows = batch / num_replicas() + (r < batch % num_replicas() ? 1 : 0);
      CopyRows(images, first, rows, &slices_[r].images);
      CopyRows(labels, first, rows, &slices_[r].labels);
      weights_[r] = static_cast<float>(rows) / static_cast<float>(batch);
      first += rows;
    }
    team_->Run([this](int r) { RunReplica(r, slices_[r].images, slices_[r].labels); });
  }
  {
    // The gradients still on their way from a device (not overlapped: all of them); the wait
    // for its backward to finish, and the reduction, count as backward.
    const auto start = Clock::now();
    const double comm_before = CommSecondsSoFar();
    if (!overlap_) {
      ForEachReplica([this](int r) {
        for (int64_t k = num_keys_ - 1; k >= 0; --k) GradientReady(r, k);
      });
    }
    {
      absl::MutexLock lock(&mu_);
      SendArrived(/*wait=*/true);
      SendState();
    }
    slices_[0].backward_seconds +=
        std::max(0.0, SecondsSince(start) - (CommSecondsSoFar() - comm_before));
  }
  if (!overlap_) {
    ForEachReplica([this](int r) {
      for (int64_t k = 0; k < num_keys_; ++k) Receive(r, k);
    });
    absl::MutexLock lock(&mu_);
    ReceiveState();
  }
  StepResult result;
  for (int r = 0; r < num_replicas(); ++r) result.loss += weights_[r] * slices_[r].loss;
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(status_);
  result.forward_seconds = slices_[0].forward_seconds;
  result.backward_seconds = slices_[0].backward_seconds;
  result.push_seconds = push_seconds_;
  result.pull_seconds = pull_seconds_;
  result.pushed_bytes = pushed_bytes_;
  result.pulled_bytes = pulled_bytes_;
  return result;
}

absl::Status StepRunner::WaitForParameters() {
  {
    absl::MutexLock lock(&mu_);
    status_ = absl::OkStatus();
  }
  ForEachReplica([this](int r) {
    for (int64_t k = 0; k < num_keys_; ++k) Receive(r, k);
  });
  absl::MutexLock lock(&mu_);
  ReceiveState();
  return status_;
}

}  // namespace cohort
