// dist_sync with W = 2 workers (local batch b each) equals the single-process trainer with the
// global batch 2b (Contracts, "Gradient arithmetic"): LeNet (no dropout), S = 2 shards, 16 KiB
// parts so the large tensors are split across both shards, 20 steps of SGD with momentum,
// weight decay and a cosine schedule, communication overlapped with computation. Every
// tensor's ‖Δ‖₂/‖ref‖₂ stays within 1e-5 on both ranks (the mean of two half-batch means is
// not bit-identical to the mean over the whole batch: float sums round differently). And the
// order in which parts reach the shards changes no bit of the result.

#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "services/testing/delaying_transport.h"
#include "services/worker/dist_kvstore.h"
#include "services/testing/local_cluster.h"
#include "trainer/base/random.h"
#include "trainer/models/models.h"
#include "trainer/ops/cpu/onednn_backend.h"
#include "trainer/loop/step.h"

namespace cohort {
namespace {

constexpr int kWorkers = 2;
constexpr int kSteps = 20;
constexpr int64_t kLocalBatch = 16;
constexpr int kClasses = 10;

struct GlobalBatch {
  Tensor images;  // (W·b, 1, 28, 28)
  Tensor labels;  // (W·b) I32
};

std::vector<GlobalBatch> MakeBatches() {
  Rng rng(2026);
  std::vector<GlobalBatch> batches;
  for (int s = 0; s < kSteps; ++s) {
    GlobalBatch b{Tensor(Shape{kWorkers * kLocalBatch, 1, 28, 28}),
                  Tensor(Shape{kWorkers * kLocalBatch}, DType::kI32)};
    for (float& v : b.images.span<float>()) v = static_cast<float>(rng.Uniform(-1, 1));
    for (int32_t& l : b.labels.span<int32_t>()) l = static_cast<int32_t>(rng.Below(kClasses));
    batches.push_back(std::move(b));
  }
  return batches;
}

OptimizerSpec Schedule() {
  OptimizerSpec spec;
  spec.optimizer_options = {0.9, 1e-4};
  spec.lr_schedule.kind = LrScheduleKind::kCosine;
  spec.lr_schedule.base_lr = 0.05;
  spec.lr_schedule.epochs = 1;
  spec.lr_schedule.steps_per_epoch = kSteps;
  return spec;
}

// Trains this rank's share of every batch; returns every parameter's final value.
absl::StatusOr<std::vector<std::vector<float>>> Train(KVStore* kv,
                                                      const std::vector<GlobalBatch>& batches) {
  OnednnBackend backend;
  auto model = BuildModel("lenet", &backend, Shape{1, 28, 28}, kClasses);
  if (!model.ok()) return model.status();
  (*model)->InitParameters(42);
  if (absl::Status s = kv->SetOptimizer(Schedule()); !s.ok()) return s;
  if (absl::Status s = InitKVStore(**model, kv); !s.ok()) return s;
  SoftmaxCrossEntropyLoss loss(&backend);
  StepRunner runner(model->get(), &loss, kv, /*overlap=*/true);
  const int64_t b = batches[0].labels.numel() / kv->num_workers();
  Tensor images, labels;
  for (const GlobalBatch& batch : batches) {
    CopyRows(batch.images, kv->rank() * b, b, &images);
    CopyRows(batch.labels, kv->rank() * b, b, &labels);
    auto step = runner.Step(images, labels);
    if (!step.ok()) return step.status();
  }
  if (absl::Status s = runner.WaitForParameters(); !s.ok()) return s;
  std::vector<std::vector<float>> values;
  for (const Parameter* p : (*model)->parameters()) {
    values.emplace_back(p->value.data<float>(), p->value.data<float>() + p->value.numel());
  }
  return values;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

using Parameters = std::vector<std::vector<float>>;

// Trains on a local cluster with kWorkers workers (S = 2) over loopback gRPC; each worker's
// pushes are held back at random from delay_seed (0: not at all). Returns every rank's result.
std::vector<absl::StatusOr<Parameters>> TrainDistributed(const std::vector<GlobalBatch>& batches,
                                                         uint64_t delay_seed) {
  LocalCluster cluster(KVStoreMode::kDistSync, kWorkers, /*num_shards=*/2);
  std::vector<absl::StatusOr<Parameters>> results(kWorkers, absl::UnknownError("not run"));
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
        results[rank] = kv.ok() ? Train(kv->get(), batches) : kv.status();
      }
      (*session)->Leave(results[rank].status());
    });
  }
  for (std::thread& t : workers) t.join();
  return results;
}

TEST(EquivalenceTest, DistSyncTwoWorkersEqualsOneProcessWithTheGlobalBatch) {
  const std::vector<GlobalBatch> batches = MakeBatches();
  auto local = CreateKVStore("local");
  ASSERT_TRUE(local.ok());
  auto reference = Train(local->get(), batches);
  ASSERT_TRUE(reference.ok()) << reference.status();

  const std::vector<absl::StatusOr<Parameters>> results = TrainDistributed(batches, 0);
  for (int rank = 0; rank < kWorkers; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank].status();
    const auto& got = *results[rank];
    ASSERT_EQ(got.size(), reference->size());
    for (size_t k = 0; k < got.size(); ++k) {
      std::vector<float> diff(got[k].size());
      for (size_t i = 0; i < diff.size(); ++i) diff[i] = got[k][i] - (*reference)[k][i];
      const double relative = Norm(diff) / Norm((*reference)[k]);
      EXPECT_LE(relative, 1e-5) << "rank " << rank << " tensor " << k;
      if (rank == 0 && k == 0) std::printf("tensor 0: relative difference %.3g\n", relative);
    }
  }
  // The ranks hold the very same values.
  EXPECT_EQ(*results[0], *results[1]);
}

// Two runs whose workers hold pushes back at random (a different pattern each run; 16 KiB
// parts, so every large tensor is split over both shards) end with bit-identical parameters:
// the shards reduce in rank order whatever order parts arrive in.
TEST(EquivalenceTest, ArrivalOrderDoesNotChangeTheParameters) {
  const std::vector<GlobalBatch> batches = MakeBatches();
  const std::vector<absl::StatusOr<Parameters>> first = TrainDistributed(batches, 1);
  const std::vector<absl::StatusOr<Parameters>> second = TrainDistributed(batches, 2);
  for (int rank = 0; rank < kWorkers; ++rank) {
    ASSERT_TRUE(first[rank].ok()) << "rank " << rank << ": " << first[rank].status();
    ASSERT_TRUE(second[rank].ok()) << "rank " << rank << ": " << second[rank].status();
    EXPECT_EQ(*first[rank], *second[rank]) << "rank " << rank;
  }
}

}  // namespace
}  // namespace cohort
