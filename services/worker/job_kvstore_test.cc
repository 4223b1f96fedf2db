// A whole job in one process over 127.0.0.1: a scheduler, two shards and two workers' kvstores.

#include "services/worker/job_kvstore.h"

#include <cstdlib>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/membership/member_session.h"
#include "services/testing/local_cluster.h"

namespace cohort {
namespace {

constexpr int kWorkers = 2;
constexpr int kShards = 2;

// The scheduler and the shards of a kWorkers × kShards job, in this process.
class Cluster : public LocalCluster {
 public:
  explicit Cluster(KVStoreMode mode) : LocalCluster(mode, kWorkers, kShards) {}
};

OptimizerSpec Sgd() {
  OptimizerSpec spec;
  spec.optimizer_options = {0.9, 1e-3};
  spec.lr_schedule.kind = LrScheduleKind::kCosine;
  spec.lr_schedule.base_lr = 0.1;
  spec.lr_schedule.steps_per_epoch = 5;
  return spec;
}

const std::vector<Shape>& Shapes() {
  static const auto* shapes = new std::vector<Shape>{Shape{6, 5}, Shape{7}, Shape{3, 2, 2}};
  return *shapes;
}

Tensor Gradient(int rank, int step, int64_t key) {
  Tensor g(Shapes()[key]);
  float* d = g.data<float>();
  for (int64_t i = 0; i < g.numel(); ++i) d[i] = 0.3f * rank - 0.1f * step + 0.01f * i - 0.2f * key;
  return g;
}

Tensor Initial(int64_t key, float offset) {
  Tensor t(Shapes()[key]);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = offset + 0.5f * i - key;
  return t;
}

// What a worker sees over the steps: every key's value after each step.
using Trace = std::vector<std::vector<std::vector<float>>>;

absl::Status RunWorker(const std::string& address, int rank, int steps, int64_t fusion_bytes,
                       Trace* trace) {
  JobOptions job;
  job.scheduler_address = address;
  job.requested_rank = rank;
  job.part_bytes = 24;  // 6 floats: every tensor is split, parts spread over both shards
  job.fusion_bytes = fusion_bytes;
  auto kv = kvstore::Create("dist_sync", job);
  if (!kv.ok()) return kv.status();
  if ((*kv)->rank() != rank || (*kv)->num_workers() != kWorkers) {
    return absl::InternalError("wrong rank or size");
  }
  if (absl::Status s = (*kv)->SetOptimizer(Sgd()); !s.ok()) return s;
  std::vector<Tensor> values;
  for (int64_t k = 0; k < 3; ++k) {
    // Only rank 0's initial values count.
    values.push_back(Initial(k, rank == 0 ? 0.0f : 100.0f));
    if (absl::Status s = (*kv)->Init(k, values[k]); !s.ok()) return s;
  }
  for (int64_t k = 0; k < 3; ++k) {
    if (absl::Status s = (*kv)->Pull(k, &values[k]); !s.ok()) return s;
  }
  trace->emplace_back();
  for (const Tensor& v : values) trace->back().emplace_back(v.data<float>(), v.data<float>() + v.numel());
  for (int step = 0; step < steps; ++step) {
    for (int64_t k = 2; k >= 0; --k) {
      if (absl::Status s = (*kv)->Push(k, Gradient(rank, step, k)); !s.ok()) return s;
    }
    trace->emplace_back();
    for (int64_t k = 0; k < 3; ++k) {
      if (absl::Status s = (*kv)->Pull(k, &values[k]); !s.ok()) return s;
      trace->back().emplace_back(values[k].data<float>(), values[k].data<float>() + values[k].numel());
    }
  }
  return (*kv)->Barrier();
}

// dist_sync equals one process applying the optimizer to (g_0 + g_1) × 1/2 at each step,
// bit for bit, on every rank, with the tensors split over both shards: each part a message,
// and parts fused.
class DistKVStoreFusionTest : public ::testing::TestWithParam<int64_t> {};

INSTANTIATE_TEST_SUITE_P(UnfusedAndFused, DistKVStoreFusionTest,
                         ::testing::Values(0, kDefaultFusionBytes));

TEST_P(DistKVStoreFusionTest, SyncTrainingEqualsTheSingleProcessUpdateOnEveryRank) {
  Cluster cluster(KVStoreMode::kDistSync);
  const int steps = 5;
  std::vector<Trace> traces(kWorkers);
  std::vector<absl::Status> results(kWorkers);
  std::vector<std::thread> workers;
  for (int r = 0; r < kWorkers; ++r) {
    workers.emplace_back(
        [&, r] { results[r] = RunWorker(cluster.address(), r, steps, GetParam(), &traces[r]); });
  }
  for (auto& t : workers) t.join();
  for (int r = 0; r < kWorkers; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];

  auto optimizer = *MakeOptimizer("sgd", Sgd().optimizer_options);
  auto schedule = *LrSchedule::Create(Sgd().lr_schedule);
  std::vector<Tensor> want;
  for (int64_t k = 0; k < 3; ++k) want.push_back(Initial(k, 0.0f));
  for (int step = 0; step <= steps; ++step) {
    if (step > 0) {
      for (int64_t k = 0; k < 3; ++k) {
        Tensor sum = Gradient(0, step - 1, k);
        const Tensor g1 = Gradient(1, step - 1, k);
        for (int64_t i = 0; i < sum.numel(); ++i) {
          sum.data<float>()[i] = (sum.data<float>()[i] + g1.data<float>()[i]) * 0.5f;
        }
        optimizer->Update(k, want[k].span<float>(), sum.span<float>(),
                          static_cast<float>(schedule.At(step - 1)));
      }
    }
    for (int r = 0; r < kWorkers; ++r) {
      for (int64_t k = 0; k < 3; ++k) {
        const std::vector<float> expected(want[k].data<float>(), want[k].data<float>() + want[k].numel());
        ASSERT_EQ(traces[r][step][k], expected) << "rank " << r << " step " << step << " key " << k;
      }
    }
  }
}

TEST(DistKVStoreTest, WorkerWithTheWrongJobModeIsTold) {
  Cluster cluster(KVStoreMode::kDistSync);
  JobOptions job;
  job.scheduler_address = cluster.address();
  auto kv = kvstore::Create("dist_async", job);
  ASSERT_FALSE(kv.ok());
  EXPECT_TRUE(absl::StrContains(kv.status().message(),
                                "--kv_store=dist_async, but job job-local-cluster runs dist_sync"))
      << kv.status();
}

// When one worker fails, the other, blocked waiting for the shards, is released with the
// scheduler's message naming the failed worker.
TEST(DistKVStoreTest, FailureOfOneWorkerReleasesTheOtherWithItsName) {
  Cluster cluster(KVStoreMode::kDistSync);
  absl::Status blocked;
  std::thread worker0([&] {
    JobOptions job;
    job.scheduler_address = cluster.address();
    job.requested_rank = 0;
    job.part_bytes = 24;
    auto kv = kvstore::Create("dist_sync", job);
    ASSERT_TRUE(kv.ok()) << kv.status();
    ASSERT_TRUE((*kv)->SetOptimizer(Sgd()).ok());
    Tensor v = Initial(0, 0);
    ASSERT_TRUE((*kv)->Init(0, v).ok());
    const absl::Status pulled = (*kv)->Pull(0, &v);
    ASSERT_TRUE(pulled.ok()) << pulled;
    ASSERT_TRUE((*kv)->Push(0, Gradient(0, 0, 0)).ok());
    blocked = (*kv)->Pull(0, &v);  // rank 1 never pushes
  });
  JobOptions job;
  job.scheduler_address = cluster.address();
  job.requested_rank = 1;
  job.part_bytes = 24;
  auto session = MemberSession::Join(job.SessionOptions());
  ASSERT_TRUE(session.ok());
  auto kv = CreateDistKVStore("dist_sync", session->get(), job);
  ASSERT_TRUE(kv.ok());
  Tensor v = Initial(0, 0);
  ASSERT_TRUE((*kv)->SetOptimizer(Sgd()).ok());
  ASSERT_TRUE((*kv)->Init(0, v).ok());
  ASSERT_TRUE((*kv)->Pull(0, &v).ok());
  absl::SleepFor(absl::Milliseconds(100));
  (*session)->Leave(absl::InternalError("out of disk space"));
  worker0.join();
  EXPECT_EQ(blocked.code(), absl::StatusCode::kAborted) << blocked;
  EXPECT_TRUE(absl::StrContains(blocked.message(), "worker 1 (host")) << blocked;
  EXPECT_TRUE(absl::StrContains(blocked.message(), "failed: out of disk space")) << blocked;
}

TEST(DistKVStoreTest, APartSizeBelowOneByteIsRefusedBeforeJoining) {
  JobOptions job;
  job.scheduler_address = "127.0.0.1:1";  // never dialled
  job.part_bytes = 0;
  auto kv = kvstore::Create("dist_sync", job);
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(kv.status().message(), "--part_bytes=0 (or COHORT_PART_BYTES)"))
      << kv.status();
}

// A program's metrics port from COHORT_METRICS_PORT (a pod's fixed port for its probes and
// scrapes); one that is no port is refused naming the variable.
TEST(DistKVStoreTest, TheMetricsPortComesFromTheEnvironment) {
  setenv("COHORT_SCHEDULER", "127.0.0.1:1", 1);
  setenv("COHORT_INSECURE", "1", 1);
  setenv("COHORT_METRICS_PORT", "7201", 1);
  absl::StatusOr<JobOptions> job = JobOptionsFromEnvironment();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->metrics_port, 7201);
  setenv("COHORT_METRICS_PORT", "70000", 1);
  job = JobOptionsFromEnvironment();
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(job.status().message(), "COHORT_METRICS_PORT=70000: a port"))
      << job.status();
  for (const char* name : {"COHORT_SCHEDULER", "COHORT_INSECURE", "COHORT_METRICS_PORT"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace cohort
