// Several device contexts per worker (--devices cpu:2): replicas trained on slices of the
// local batch and reduced before the push equal one context trained on the whole batch.

#include "trainer/loop/step.h"

#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/loop/devices.h"
#include "trainer/models/models.h"

namespace cohort {
namespace {

constexpr int kSteps = 20;
constexpr int kClasses = 10;

struct Batch {
  Tensor images;  // (N, 1, 28, 28)
  Tensor labels;  // (N) I32
};

std::vector<Batch> MakeBatches(int64_t batch) {
  Rng rng(7);
  std::vector<Batch> batches;
  for (int s = 0; s < kSteps; ++s) {
    Batch b{Tensor(Shape{batch, 1, 28, 28}), Tensor(Shape{batch}, DType::kI32)};
    for (float& v : b.images.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
    for (int32_t& l : b.labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(kClasses));
    batches.push_back(std::move(b));
  }
  return batches;
}

using Values = std::vector<std::vector<float>>;

Values Copy(const std::vector<Tensor*>& tensors) {
  Values out;
  for (const Tensor* t : tensors) out.emplace_back(t->data<float>(), t->data<float>() + t->numel());
  return out;
}

std::vector<Tensor*> ParameterValues(const Model& m) {
  std::vector<Tensor*> out;
  for (Parameter* p : m.parameters()) out.push_back(&p->value);
  return out;
}

std::vector<Tensor*> StateValues(const Model& m) {
  std::vector<Tensor*> out;
  for (const StateTensor& s : m.state()) out.push_back(s.value);
  return out;
}

// A small network with batch norm, so running statistics are part of the replicas' state.
absl::StatusOr<std::unique_ptr<Model>> ConvBnNet(Backend* backend) {
  return ModelBuilder(backend, "conv_bn", Shape{1, 28, 28})
      .Conv2d("conv1", 4, 5, 2, 0)
      .BatchNorm("bn1")
      .Relu("relu1")
      .Flatten("flatten")
      .Linear("fc", kClasses)
      .Build();
}

struct Trained {
  std::vector<Values> parameters, state;  // per replica
  double last_loss = 0;
  std::vector<StepResult> steps;
  int64_t parameter_bytes = 0;
  Values first_pushes;  // by key: the gradient the first step pushed
};

// The local store, with every Wait taking `wait` longer: a slow network. Keeps the first
// gradient pushed to each key.
class SlowWaitKVStore : public KVStore {
 public:
  SlowWaitKVStore(std::unique_ptr<KVStore> inner, absl::Duration wait)
      : inner_(std::move(inner)), wait_(wait) {}
  KVStoreMode mode() const override { return inner_->mode(); }
  int rank() const override { return 0; }
  int num_workers() const override { return 1; }
  absl::Status SetOptimizer(const OptimizerSpec& spec) override {
    return inner_->SetOptimizer(spec);
  }
  absl::Status SetLearningRate(float lr) override { return inner_->SetLearningRate(lr); }
  absl::Status Init(int64_t key, const Tensor& value) override { return inner_->Init(key, value); }
  absl::Status InitAuxiliary(int64_t key, const Tensor& value) override {
    return inner_->InitAuxiliary(key, value);
  }
  absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out) override {
    if (static_cast<size_t>(key) >= first_pushes_.size()) first_pushes_.resize(key + 1);
    if (first_pushes_[key].empty()) {
      first_pushes_[key].assign(grad.data<float>(), grad.data<float>() + grad.numel());
    }
    return inner_->PushPull(key, grad, out);
  }
  absl::Status Wait(int64_t key) override {
    absl::SleepFor(wait_);
    return inner_->Wait(key);
  }
  absl::Status Push(int64_t key, const Tensor& grad) override { return inner_->Push(key, grad); }
  absl::Status Pull(int64_t key, Tensor* out) override { return inner_->Pull(key, out); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  const Values& first_pushes() const { return first_pushes_; }

 private:
  std::unique_ptr<KVStore> inner_;
  const absl::Duration wait_;
  Values first_pushes_;
};

// What a HostCopyExchange moved; outlives the exchange and the runner that owns it.
struct ExchangeCounts {
  int made = 0, sent = 0, received = 0;
  // How long HostGradient takes: the device still finishing backward and the copy down.
  absl::Duration landing = absl::ZeroDuration();
};

// A device's exchange, played on the host: gradients are copied to host buffers (and the
// model's own poisoned, so only the copies can be pushed) and arrive only at the second look;
// values are copied back. It scales the loss as fp16 loss scaling does, by powers of two that
// change every step, and unscales the copies, so training is exactly that of the host.
class HostCopyExchange final : public ParameterExchange {
 public:
  HostCopyExchange(std::vector<ParameterTensors> params, ExchangeCounts* counts)
      : params_(std::move(params)), counts_(counts) {
    ++counts_->made;
    for (const ParameterTensors& p : params_) {
      grads_.emplace_back(p.grad->shape());
      values_.emplace_back(p.value->shape());
    }
    looks_.assign(params_.size(), 0);
  }
  float BeginStep() override {
    scale_ = steps_++ % 2 == 0 ? 4.0f : 0.5f;
    return scale_;
  }
  void SendGradient(int64_t key) override {
    grads_[key].CopyFrom(*params_[key].grad);
    for (float& g : grads_[key].span<float>()) g /= scale_;
    for (float& g : params_[key].grad->span<float>()) g = std::nanf("");
    looks_[key] = 0;
    ++counts_->sent;
  }
  bool GradientArrived(int64_t key) override { return ++looks_[key] > 1; }
  const Tensor& HostGradient(int64_t key) override {
    absl::SleepFor(counts_->landing);
    return grads_[key];
  }
  Tensor* HostValue(int64_t key) override { return &values_[key]; }
  void ReceiveValue(int64_t key) override {
    params_[key].value->CopyFrom(values_[key]);
    ++counts_->received;
  }

 private:
  std::vector<ParameterTensors> params_;
  ExchangeCounts* counts_;
  std::vector<Tensor> grads_, values_;
  std::vector<int> looks_;
  float scale_ = 1.0f;
  int steps_ = 0;
};

// The CPU backend, but with its parameters kept apart from the kvstore as a device's are.
// Everything else is the inner backend's, its activations' layout included.
class ExchangingBackend final : public Backend {
 public:
  ExchangingBackend(Backend* inner, ExchangeCounts* counts) : inner_(inner), counts_(counts) {}
  absl::string_view name() const override { return inner_->name(); }
  DType dtype() const override { return inner_->dtype(); }
  void BindCallingThread() override { inner_->BindCallingThread(); }
  const Tensor& ImportImages(const Tensor& images, Tensor* scratch) override {
    return inner_->ImportImages(images, scratch);
  }
  std::unique_ptr<ParameterExchange> MakeParameterExchange(
      std::vector<ParameterTensors> params) override {
    return std::make_unique<HostCopyExchange>(std::move(params), counts_);
  }
  std::unique_ptr<Op> Conv2d(const Conv2dSpec& s) override { return inner_->Conv2d(s); }
  std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& s) override { return inner_->MaxPool2d(s); }
  std::unique_ptr<Op> AvgPool2d(const Pool2dSpec& s) override { return inner_->AvgPool2d(s); }
  std::unique_ptr<Op> GlobalAvgPool() override { return inner_->GlobalAvgPool(); }
  std::unique_ptr<Op> BatchNorm(const BatchNormSpec& s) override { return inner_->BatchNorm(s); }
  std::unique_ptr<Op> Add() override { return inner_->Add(); }
  std::unique_ptr<Op> Concat() override { return inner_->Concat(); }
  std::unique_ptr<Op> Flatten() override { return inner_->Flatten(); }
  std::unique_ptr<Op> Dropout(const DropoutSpec& s) override { return inner_->Dropout(s); }
  std::unique_ptr<Op> SubsamplePad(const SubsamplePadSpec& s) override {
    return inner_->SubsamplePad(s);
  }
  std::unique_ptr<Op> Relu() override { return inner_->Relu(); }
  std::unique_ptr<Op> Linear() override { return inner_->Linear(); }
  std::unique_ptr<Op> SoftmaxCrossEntropy() override { return inner_->SoftmaxCrossEntropy(); }
  std::unique_ptr<Op> FuseRelu(const Op& op) override { return inner_->FuseRelu(op); }

 private:
  Backend* inner_;
  ExchangeCounts* counts_;
};

// Trains `model` on every batch with the local kvstore (SGD with momentum and weight decay)
// over the device contexts `devices` names (with counts, each through an ExchangingBackend).
absl::StatusOr<Trained> Train(const std::string& model_name, const std::string& devices,
                              const std::vector<Batch>& batches, bool overlap,
                              absl::Duration wait = absl::ZeroDuration(),
                              ExchangeCounts* counts = nullptr) {
  auto backends = MakeDeviceBackends(devices);
  if (!backends.ok()) return backends.status();
  std::vector<std::unique_ptr<Backend>> wrappers;
  if (counts != nullptr) {
    for (auto& inner : *backends) {
      wrappers.push_back(std::make_unique<ExchangingBackend>(inner.get(), counts));
    }
  }
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::unique_ptr<SoftmaxCrossEntropyLoss>> losses;
  std::vector<Replica> replicas;
  for (auto& owned : counts != nullptr ? wrappers : *backends) {
    Backend* backend = owned.get();
    auto model = model_name == "conv_bn"
                     ? ConvBnNet(backend)
                     : BuildModel(model_name, backend, Shape{1, 28, 28}, kClasses);
    if (!model.ok()) return model.status();
    models.push_back(std::move(*model));
    // Replicas other than the first start from other weights: the runner must copy them.
    models.back()->InitParameters(42 + models.size() - 1);
    losses.push_back(std::make_unique<SoftmaxCrossEntropyLoss>(backend));
    replicas.push_back({models.back().get(), losses.back().get(), backend});
  }
  auto local = CreateKVStore("local");
  if (!local.ok()) return local.status();
  auto owned_kv = std::make_unique<SlowWaitKVStore>(std::move(*local), wait);
  const SlowWaitKVStore& recorder = *owned_kv;
  absl::StatusOr<std::unique_ptr<KVStore>> kv = std::move(owned_kv);
  OptimizerSpec spec;
  spec.optimizer_options = {0.9, 1e-4};
  spec.lr_schedule.base_lr = 0.05;
  if (absl::Status s = (*kv)->SetOptimizer(spec); !s.ok()) return s;
  if (absl::Status s = InitKVStore(*models[0], kv->get()); !s.ok()) return s;
  StepRunner runner(std::move(replicas), kv->get(), overlap);
  Trained out;
  for (const Batch& batch : batches) {
    auto step = runner.Step(batch.images, batch.labels);
    if (!step.ok()) return step.status();
    out.last_loss = step->loss;
    out.steps.push_back(*step);
  }
  for (Tensor* t : ParameterValues(*models[0])) out.parameter_bytes += t->nbytes();
  out.first_pushes = recorder.first_pushes();
  if (absl::Status s = runner.WaitForParameters(); !s.ok()) return s;
  for (const auto& m : models) {
    out.parameters.push_back(Copy(ParameterValues(*m)));
    out.state.push_back(Copy(StateValues(*m)));
  }
  return out;
}

double RelativeDifference(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

void ExpectClose(const Values& got, const Values& want, double tolerance, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size()) << what << " " << k;
    EXPECT_LE(RelativeDifference(got[k], want[k]), tolerance) << what << " " << k;
  }
}

class TwoContextsTest : public ::testing::TestWithParam<bool> {};  // overlap or not

// An odd batch (17 + 16 rows) checks that the reduce weighs each slice by its size.
TEST_P(TwoContextsTest, EqualOneContextOnTheWholeBatch) {
  const std::vector<Batch> batches = MakeBatches(33);
  auto one = Train("lenet", "cpu", batches, GetParam());
  ASSERT_TRUE(one.ok()) << one.status();
  auto two = Train("lenet", "cpu:2", batches, GetParam());
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->parameters.size(), 2u);
  ExpectClose(two->parameters[0], one->parameters[0], 1e-5, "parameter");
  EXPECT_EQ(two->parameters[0], two->parameters[1]);  // both contexts hold the pulled values
  EXPECT_NEAR(two->last_loss, one->last_loss, 1e-4 * std::abs(one->last_loss));
}

INSTANTIATE_TEST_SUITE_P(Overlap, TwoContextsTest, ::testing::Bool());

// Each context normalises with its own slice's statistics (as per-device batch norm does), so
// training differs from one context; the running statistics are averaged. After one step from
// equal weights, running_mean = momentum · batch mean is linear in the batch mean, so the average
// of the two halves' equals the whole batch's; running_var is not (each half has its own spread).
TEST(StepRunnerTest, BatchNormStatisticsAreAveragedAcrossContexts) {
  std::vector<Batch> batches = MakeBatches(32);
  batches.resize(1);
  auto one = Train("conv_bn", "cpu", batches, true);
  ASSERT_TRUE(one.ok()) << one.status();
  auto two = Train("conv_bn", "cpu:2", batches, true);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->state[0].size(), 2u);
  EXPECT_LE(RelativeDifference(two->state[0][0], one->state[0][0]), 1e-6) << "running_mean";
  EXPECT_LE(RelativeDifference(two->state[0][1], one->state[0][1]), 0.1) << "running_var";
  EXPECT_EQ(two->state[0], two->state[1]);
  EXPECT_EQ(two->parameters[0], two->parameters[1]);
}

class StepTimingTest : public ::testing::TestWithParam<bool> {};  // overlap or not

// Every Wait takes 30 ms: the step reports that time as pull wait, not as forward, and counts
// the bytes each way once per step. (The wait is long so that a forward slowed down by a busy
// machine still stays far below the waits it must not include.)
TEST_P(StepTimingTest, ReportsPhasesAndBytes) {
  const bool overlap = GetParam();
  std::vector<Batch> batches = MakeBatches(8);
  batches.resize(3);
  constexpr double kWait = 0.03;
  auto run = Train("lenet", "cpu", batches, overlap, absl::Seconds(kWait));
  ASSERT_TRUE(run.ok()) << run.status();
  const int64_t keys = static_cast<int64_t>(run->parameters[0].size());
  for (size_t s = 0; s < run->steps.size(); ++s) {
    const StepResult& step = run->steps[s];
    EXPECT_EQ(step.pushed_bytes, run->parameter_bytes) << "step " << s;
    // Overlapped, a step's values are waited for by the next step's forward.
    EXPECT_EQ(step.pulled_bytes, overlap && s == 0 ? 0 : run->parameter_bytes) << "step " << s;
    EXPECT_GT(step.forward_seconds, 0) << "step " << s;
    EXPECT_GT(step.backward_seconds, 0) << "step " << s;
    EXPECT_GE(step.push_seconds, 0) << "step " << s;
    if (step.pulled_bytes == 0) continue;
    EXPECT_GE(step.pull_seconds, kWait * keys) << "step " << s;
    EXPECT_LT(step.forward_seconds, kWait * keys) << "step " << s;
    EXPECT_DOUBLE_EQ(step.comm_seconds(), step.push_seconds + step.pull_seconds);
  }
}

INSTANTIATE_TEST_SUITE_P(Overlap, StepTimingTest, ::testing::Bool());

class ExchangeTest : public ::testing::TestWithParam<bool> {};  // overlap or not

// Parameters kept apart from the kvstore (a GPU's) train exactly as host parameters do: every
// gradient goes down and every value comes back once per step, late arrivals included.
TEST_P(ExchangeTest, TrainsAsTheHostParametersDo) {
  std::vector<Batch> batches = MakeBatches(16);
  batches.resize(4);
  auto direct = Train("lenet", "cpu", batches, GetParam());
  ASSERT_TRUE(direct.ok()) << direct.status();
  ExchangeCounts counts;
  auto exchanged = Train("lenet", "cpu", batches, GetParam(), absl::ZeroDuration(), &counts);
  ASSERT_TRUE(exchanged.ok()) << exchanged.status();
  EXPECT_EQ(counts.made, 1);
  EXPECT_EQ(exchanged->parameters[0], direct->parameters[0]);
  EXPECT_EQ(exchanged->last_loss, direct->last_loss);
  const int keys = static_cast<int>(direct->parameters[0].size());
  EXPECT_EQ(counts.sent, 4 * keys);
  EXPECT_EQ(counts.received, 4 * keys);
  EXPECT_EQ(exchanged->steps.back().pushed_bytes, direct->steps.back().pushed_bytes);
}

INSTANTIATE_TEST_SUITE_P(Overlap, ExchangeTest, ::testing::Bool());

// Waiting for a device's gradient to land is the device's backward, not communication: a GPU
// worker's Comm% counts only the time in kvstore calls.
TEST_P(ExchangeTest, DeviceWaitsCountAsBackwardNotCommunication) {
  std::vector<Batch> batches = MakeBatches(8);
  batches.resize(3);
  ExchangeCounts counts;
  counts.landing = absl::Milliseconds(10);
  auto run = Train("lenet", "cpu", batches, GetParam(), absl::ZeroDuration(), &counts);
  ASSERT_TRUE(run.ok()) << run.status();
  const double landing = 0.010 * static_cast<double>(run->parameters[0].size());
  for (size_t s = 0; s < run->steps.size(); ++s) {
    EXPECT_GE(run->steps[s].backward_seconds, 0.9 * landing) << "step " << s;
    EXPECT_LT(run->steps[s].push_seconds, 0.5 * landing) << "step " << s;
  }
}

class DeviceReplicasTest : public ::testing::TestWithParam<bool> {};  // overlap or not

// Several replicas on devices (--devices gpu:0,1, played by host-copy exchanges that scale the
// loss differently every step and poison the models' own gradients): the host gradients are
// reduced in replica order and the pulled values copied into every replica, bit for bit what
// the same replicas do on the host (--devices cpu:2, in place), batch-norm statistics included.
// An odd batch (17 + 16 rows) checks the weights.
TEST_P(DeviceReplicasTest, EqualTheSameReplicasOnTheHost) {
  std::vector<Batch> batches = MakeBatches(33);
  batches.resize(5);
  for (const char* model : {"lenet", "conv_bn"}) {
    auto host = Train(model, "cpu:2", batches, GetParam());
    ASSERT_TRUE(host.ok()) << host.status();
    ExchangeCounts counts;
    auto device = Train(model, "cpu:2", batches, GetParam(), absl::ZeroDuration(), &counts);
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(counts.made, 2) << model;
    const int keys = static_cast<int>(host->parameters[0].size());
    EXPECT_EQ(counts.sent, 2 * 5 * keys) << model;  // every replica's gradient goes down
    EXPECT_EQ(counts.received, 2 * 5 * keys) << model;  // every replica takes every value
    ASSERT_EQ(device->parameters.size(), 2u);
    EXPECT_EQ(device->parameters[0], host->parameters[0]) << model;
    EXPECT_EQ(device->parameters[1], host->parameters[0]) << model;
    EXPECT_EQ(device->state, host->state) << model;
    EXPECT_EQ(device->last_loss, host->last_loss) << model;
    // One push per key, of the reduced gradient.
    EXPECT_EQ(device->steps.back().pushed_bytes, host->steps.back().pushed_bytes) << model;
  }
}

INSTANTIATE_TEST_SUITE_P(Overlap, DeviceReplicasTest, ::testing::Bool());

// What the replicas push is each slice's gradient, as one replica computes it alone from the
// same weights on a context of the same threads, summed in replica order with the slices'
// weights: g0 · 17/33 + g1 · 16/33, bit for bit.
TEST(StepRunnerTest, PushesTheSliceGradientsSummedInReplicaOrder) {
  std::vector<Batch> batches = MakeBatches(33);
  batches.resize(1);
  ExchangeCounts counts;
  auto device = Train("lenet", "cpu:2", batches, true, absl::ZeroDuration(), &counts);
  ASSERT_TRUE(device.ok()) << device.status();

  auto backends = MakeDeviceBackends("cpu:2");
  ASSERT_TRUE(backends.ok()) << backends.status();
  const int64_t rows[2] = {17, 16};
  std::vector<Values> slice_grads(2);
  int64_t first = 0;
  for (int r = 0; r < 2; ++r) {
    Tensor images, labels;
    CopyRows(batches[0].images, first, rows[r], &images);
    CopyRows(batches[0].labels, first, rows[r], &labels);
    first += rows[r];
    std::thread([&, r] {  // a thread of its own, as the runner's replicas
      Backend* backend = (*backends)[r].get();
      backend->BindCallingThread();
      auto model = BuildModel("lenet", backend, Shape{1, 28, 28}, kClasses);
      ASSERT_TRUE(model.ok()) << model.status();
      (*model)->InitParameters(42);  // the first replica's weights, which every replica starts from
      SoftmaxCrossEntropyLoss loss(backend);
      loss.Forward((*model)->Forward(Mode::kTrain, images), labels);
      (*model)->Backward(loss.Backward());
      for (Parameter* p : (*model)->parameters()) slice_grads[r].push_back(Copy({&p->grad})[0]);
    }).join();
  }
  const float w0 = 17.0f / 33.0f, w1 = 16.0f / 33.0f;
  ASSERT_EQ(device->first_pushes.size(), slice_grads[0].size());
  for (size_t k = 0; k < slice_grads[0].size(); ++k) {
    std::vector<float> want(slice_grads[0][k].size());
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] = slice_grads[0][k][i] * w0;
      want[i] += w1 * slice_grads[1][k][i];
    }
    EXPECT_EQ(device->first_pushes[k], want) << "key " << k;
  }
}

TEST(StepRunnerTest, RefusesABatchSmallerThanTheContexts) {
  const std::vector<Batch> batches = MakeBatches(1);
  auto two = Train("lenet", "cpu:2", batches, true);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("cannot be split over 2 device contexts"),
            std::string::npos)
      << two.status();
}

}  // namespace
}  // namespace cohort
