// dist_sync with W = 2 workers (local batch b each) equals the single-process trainer with the
// global batch 2b (Contracts, "Gradient arithmetic"): S = 2 shards, 16 KiB parts so the large
// tensors are split across both shards, SGD with momentum, weight decay and a cosine schedule,
// communication overlapped with computation. LeNet (no dropout) against one context on the
// whole batch; ResNet-20 against the batch split over 2 contexts (--devices cpu:2), since batch
// norm normalises each worker's (each context's) own batch, and with its running statistics,
// which the workers average through the kvstore as the contexts do. Every exported tensor's
// ‖Δ‖₂/‖ref‖₂ stays within 1e-5 on both ranks (LeNet's mean of two half-batch gradients is not
// bit-identical to the gradient over the whole batch: float sums round differently). ResNet-20
// is bitwise equal: each worker and each context computes on one thread (OMP_NUM_THREADS=1 in
// the BUILD file), so their convolutions round alike, and the shards sum gradients and
// statistics in rank order times 1/W as the contexts do (a network with batch norm amplifies
// any rounding difference, so this is where a wrong statistic would show). And the order in
// which parts reach the shards changes no bit of the result.

#include <cmath>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "services/testing/delaying_transport.h"
#include "services/worker/job_kvstore.h"
#include "services/testing/local_cluster.h"
#include "trainer/base/random.h"
#include "trainer/loop/devices.h"
#include "trainer/models/models.h"
#include "trainer/loop/step.h"

namespace cohort {
namespace {

constexpr int kWorkers = 2;
constexpr int64_t kLocalBatch = 16;
constexpr int kClasses = 10;

struct ModelCase {
  std::string model;
  Shape input;              // (C, H, W)
  int steps;
  std::string reference_devices;  // the single process's --devices
  bool bitwise;                   // the reference computes the workers' very sums
};

const ModelCase kLenet{"lenet", Shape{1, 28, 28}, 20, "cpu", false};
const ModelCase kResnet20{"resnet20", Shape{3, 32, 32}, 12, "cpu:2", true};

struct GlobalBatch {
  Tensor images;  // (W·b, C, H, W)
  Tensor labels;  // (W·b) I32
};

std::vector<GlobalBatch> MakeBatches(const ModelCase& c) {
  Rng rng(2026);
  std::vector<GlobalBatch> batches;
  for (int s = 0; s < c.steps; ++s) {
    GlobalBatch b{Tensor(Shape{kWorkers * kLocalBatch, c.input[0], c.input[1], c.input[2]}),
                  Tensor(Shape{kWorkers * kLocalBatch}, DType::kI32)};
    for (float& v : b.images.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
    for (int32_t& l : b.labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(kClasses));
    batches.push_back(std::move(b));
  }
  return batches;
}

OptimizerSpec Schedule(const ModelCase& c) {
  OptimizerSpec spec;
  spec.optimizer_options = {0.9, 1e-4};
  spec.lr_schedule.kind = LrScheduleKind::kCosine;
  spec.lr_schedule.base_lr = 0.05;
  spec.lr_schedule.epochs = 1;
  spec.lr_schedule.steps_per_epoch = c.steps;
  return spec;
}

// Every tensor a model file holds (parameters and running statistics), by name.
using Exported = std::vector<std::pair<std::string, std::vector<float>>>;

// Trains this rank's share of every batch on `devices`; returns what the model file would hold.
absl::StatusOr<Exported> Train(KVStore* kv, const ModelCase& c, const std::string& devices,
                               const std::vector<GlobalBatch>& batches) {
  auto backends = MakeDeviceBackends(devices);
  if (!backends.ok()) return backends.status();
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::unique_ptr<SoftmaxCrossEntropyLoss>> losses;
  std::vector<Replica> replicas;
  for (auto& backend : *backends) {
    auto model = BuildModel(c.model, backend.get(), c.input, kClasses);
    if (!model.ok()) return model.status();
    models.push_back(std::move(*model));
    models.back()->InitParameters(42);
    losses.push_back(std::make_unique<SoftmaxCrossEntropyLoss>(backend.get()));
    replicas.push_back({models.back().get(), losses.back().get(), backend.get()});
  }
  if (absl::Status s = kv->SetOptimizer(Schedule(c)); !s.ok()) return s;
  if (absl::Status s = InitKVStore(*models[0], kv); !s.ok()) return s;
  StepRunner runner(std::move(replicas), kv, /*overlap=*/true);
  const int64_t b = batches[0].labels.numel() / kv->num_workers();
  Tensor images, labels;
  for (const GlobalBatch& batch : batches) {
    CopyRows(batch.images, kv->rank() * b, b, &images);
    CopyRows(batch.labels, kv->rank() * b, b, &labels);
    auto step = runner.Step(images, labels);
    if (!step.ok()) return step.status();
  }
  if (absl::Status s = runner.WaitForParameters(); !s.ok()) return s;
  Exported values;
  for (const StateTensor& t : models[0]->ExportedTensors()) {
    values.emplace_back(t.name, std::vector<float>(t.value->data<float>(),
                                                   t.value->data<float>() + t.value->numel()));
  }
  return values;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// Trains on a local cluster with kWorkers workers (S = 2) over loopback gRPC; each worker's
// pushes are held back at random from delay_seed (0: not at all). Returns every rank's result.
std::vector<absl::StatusOr<Exported>> TrainDistributed(const ModelCase& c,
                                                       const std::vector<GlobalBatch>& batches,
                                                       uint64_t delay_seed) {
  LocalCluster cluster(KVStoreMode::kDistSync, kWorkers, /*num_shards=*/2);
  std::vector<absl::StatusOr<Exported>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> workers;
  for (int rank = 0; rank < kWorkers; ++rank) {
    workers.emplace_back([&, rank] {
      JobOptions job;
      job.scheduler_address = cluster.address();
      job.requested_rank = rank;
      job.part_bytes = 16 << 10;
      auto session = MemberSession::Join(job.SessionOptions());
      if (!session.ok()) {
        results[rank] = session.status();
        return;
      }
      TransportWrapper delay = nullptr;
      if (delay_seed != 0) {
        delay = [delay_seed](std::unique_ptr<ShardTransport> grpc) {
          return MakeDelayingTransport(std::move(grpc), delay_seed, kWorkers);
        };
      }
      {  // the store goes before the session it runs on
        auto kv = CreateDistKVStore("dist_sync", session->get(), job, delay);
        results[rank] = kv.ok() ? Train(kv->get(), c, "cpu", batches) : kv.status();
      }
      (*session)->Leave(results[rank].status());
    });
  }
  for (std::thread& t : workers) t.join();
  return results;
}

class EquivalenceTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(EquivalenceTest, DistSyncTwoWorkersEqualsOneProcessWithTheGlobalBatch) {
  const ModelCase& c = GetParam();
  const std::vector<GlobalBatch> batches = MakeBatches(c);
  auto local = CreateKVStore("local");
  ASSERT_TRUE(local.ok());
  auto reference = Train(local->get(), c, c.reference_devices, batches);
  ASSERT_TRUE(reference.ok()) << reference.status();

  const std::vector<absl::StatusOr<Exported>> results = TrainDistributed(c, batches, 0);
  for (int rank = 0; rank < kWorkers; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank].status();
    const Exported& got = *results[rank];
    ASSERT_EQ(got.size(), reference->size());
    double worst = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      const auto& [name, want] = (*reference)[k];
      ASSERT_EQ(got[k].first, name);
      std::vector<float> diff(want.size());
      for (size_t i = 0; i < diff.size(); ++i) diff[i] = got[k].second[i] - want[i];
      const double relative = Norm(diff) / Norm(want);
      EXPECT_LE(relative, 1e-5) << "rank " << rank << " " << name;
      if (c.bitwise) EXPECT_EQ(got[k].second, want) << "rank " << rank << " " << name;
      worst = std::max(worst, relative);
    }
    if (rank == 0) std::printf("%s: largest relative difference %.3g\n", c.model.c_str(), worst);
  }
  // The ranks hold the very same values.
  EXPECT_EQ(*results[0], *results[1]);
}

INSTANTIATE_TEST_SUITE_P(Models, EquivalenceTest, ::testing::Values(kLenet, kResnet20),
                         [](const auto& info) { return info.param.model; });

// Two runs whose workers hold pushes back at random (a different pattern each run; 16 KiB
// parts, so every large tensor is split over both shards) end with bit-identical parameters:
// the shards reduce in rank order whatever order parts arrive in.
TEST(ArrivalOrderTest, ArrivalOrderDoesNotChangeTheParameters) {
  const std::vector<GlobalBatch> batches = MakeBatches(kLenet);
  const std::vector<absl::StatusOr<Exported>> first = TrainDistributed(kLenet, batches, 1);
  const std::vector<absl::StatusOr<Exported>> second = TrainDistributed(kLenet, batches, 2);
  for (int rank = 0; rank < kWorkers; ++rank) {
    ASSERT_TRUE(first[rank].ok()) << "rank " << rank << ": " << first[rank].status();
    ASSERT_TRUE(second[rank].ok()) << "rank " << rank << ": " << second[rank].status();
    EXPECT_EQ(*first[rank], *second[rank]) << "rank " << rank;
  }
}

}  // namespace
}  // namespace cohort
