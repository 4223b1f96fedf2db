#include "trainer/kvstore/kvstore.h"

#include <cmath>

#include "gtest/gtest.h"

namespace cohort {
namespace {

OptimizerSpec Options() {
  OptimizerSpec o;
  o.optimizer = "sgd";
  o.optimizer_options.momentum = 0.9;
  o.optimizer_options.weight_decay = 0.01;
  o.lr_schedule.kind = LrScheduleKind::kCosine;
  o.lr_schedule.base_lr = 0.5;
  o.lr_schedule.epochs = 1;
  o.lr_schedule.steps_per_epoch = 5;
  return o;
}

Tensor Filled(const Shape& shape, float start) {
  Tensor t(shape);
  for (float& v : t.span<float>()) v = (start += 0.5f);
  return t;
}

// Pushing gradients and pulling weights equals running the optimizer with the schedule's
// learning rate of each key's step, as the single-process loop would, or with the rate
// SetLearningRate gave (0 included; negative: the schedule's again).
TEST(LocalKVStoreTest, PushPullEqualsOptimizerWithScheduleOrTheRateSet) {
  auto kv = CreateKVStore("local");
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE((*kv)->SetOptimizer(Options()).ok());
  EXPECT_EQ((*kv)->type(), "local");
  EXPECT_EQ((*kv)->rank(), 0);
  EXPECT_EQ((*kv)->num_workers(), 1);
  Sgd sgd({0.9f, 0.01f});
  auto schedule = *LrSchedule::Create(Options().lr_schedule);
  std::vector<Tensor> want;
  want.push_back(Filled(Shape{2, 3}, 1));
  want.push_back(Filled(Shape{4}, -3));
  for (int64_t k = 0; k < 2; ++k) ASSERT_TRUE((*kv)->Init(k, want[k]).ok());
  Tensor got;
  const float rates[] = {-1, 0.125f, 0, 2, -1};
  for (int64_t step = 0; step < 5; ++step) {
    ASSERT_TRUE((*kv)->SetLearningRate(rates[step]).ok());
    for (int64_t k = 0; k < 2; ++k) {
      const Tensor grad = Filled(want[k].shape(), static_cast<float>(step - k));
      sgd.Update(k, want[k].span<float>(), grad.span<float>(),
                 rates[step] >= 0 ? rates[step] : static_cast<float>(schedule.At(step)));
      got.Resize(want[k].shape());
      ASSERT_TRUE((*kv)->PushPull(k, grad, &got).ok());
      ASSERT_TRUE((*kv)->Wait(k).ok());
      for (int64_t i = 0; i < got.numel(); ++i) {
        ASSERT_EQ(got.data<float>()[i], want[k].data<float>()[i]) << "key " << k << " step " << step;
      }
    }
  }
  EXPECT_TRUE((*kv)->Barrier().ok());
  EXPECT_EQ((*kv)->SetLearningRate(NAN).message(),
            "kvstore: learning rate nan; give a finite rate (negative: the schedule's)");
}

// An auxiliary key of a one-worker store takes the push as it is, optimizer or not.
TEST(LocalKVStoreTest, AuxiliaryKeyTakesThePush) {
  auto kv = *CreateKVStore("local");
  ASSERT_TRUE(kv->InitAuxiliary(0, Filled(Shape{3}, 0)).ok());
  const Tensor local = Filled(Shape{3}, 7);
  Tensor out(Shape{3});
  ASSERT_TRUE(kv->PushPull(0, local, &out).ok());
  ASSERT_TRUE(kv->Wait(0).ok());
  EXPECT_EQ(std::vector<float>(out.span<float>().begin(), out.span<float>().end()),
            std::vector<float>(local.span<float>().begin(), local.span<float>().end()));
}

TEST(LocalKVStoreTest, ErrorsNameTheKey) {
  auto kv = *CreateKVStore("local");
  Tensor t(Shape{3});
  EXPECT_EQ(kv->Pull(7, &t).message(), "kvstore pull of key 7 before its init");
  EXPECT_EQ(kv->Wait(7).message(), "kvstore wait of key 7 before its init");
  ASSERT_TRUE(kv->Init(7, Filled(Shape{3}, 0)).ok());
  Tensor wrong(Shape{4});
  EXPECT_EQ(kv->Push(7, wrong).message(), "kvstore push of key 7: F32 (4), the key holds F32 (3)");
  EXPECT_EQ(kv->Push(7, Filled(Shape{3}, 0)).message(),
            "kvstore push of key 7 before SetOptimizer");
  EXPECT_FALSE(kv->Init(8, Tensor(Shape{2}, DType::kF64)).ok());
}

TEST(CreateKVStoreTest, TypesAndOptionsAreChecked) {
  EXPECT_EQ(CreateKVStore("dist").status().message(),
            "--kv_store=dist: expected local, dist_sync or dist_async");
  EXPECT_EQ(CreateKVStore("dist_sync").status().code(), absl::StatusCode::kUnimplemented);
  OptimizerSpec bad = Options();
  bad.optimizer = "lamb";
  EXPECT_FALSE((*CreateKVStore("local"))->SetOptimizer(bad).ok());
}

}  // namespace
}  // namespace cohort

namespace cohort {
namespace {

TableSpec SmallTable(const std::string& optimizer) {
  TableSpec spec;
  spec.name = "C3";
  spec.dim = 3;
  spec.rows = 10;
  spec.seed = 4;
  spec.optimizer = optimizer;
  return spec;
}

// A table's rows pulled and pushed through the store are those of the table itself updated
// with the schedule's rate at the table's step.
TEST(LocalKVStoreTest, TableRowsFollowTheTableAtTheSchedulesRate) {
  auto kv = CreateKVStore("local");
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE((*kv)->SetOptimizer(Options()).ok());
  ASSERT_TRUE((*kv)->InitTable(7, SmallTable("adagrad")).ok());
  RowAdagrad adagrad({});
  EmbeddingTable mirror(SmallTable("adagrad"), &adagrad);
  auto schedule = *LrSchedule::Create(Options().lr_schedule);
  const std::vector<uint64_t> ids = {3, 13, 8, 123456789};
  for (int step = 0; step < 4; ++step) {
    Tensor grads = Filled({4, 3}, static_cast<float>(step) - 2.0f);
    ASSERT_TRUE((*kv)->PushRows(7, ids, grads).ok());
    ASSERT_TRUE(mirror.Apply(ids, grads.span<float>(), static_cast<float>(schedule.At(step))).ok());
  }
  Tensor rows({4, 3}), want({4, 3});
  ASSERT_TRUE((*kv)->PullRows(7, ids, &rows).ok());
  ASSERT_TRUE(mirror.Pull(ids, want.span<float>()).ok());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(rows.span<float>()[i], want.span<float>()[i]) << i;
  EXPECT_EQ(rows.span<float>()[0], rows.span<float>()[3]);  // 3 and 13 share row 3
}

TEST(LocalKVStoreTest, TableCallsAreRefusedSayingWhy) {
  auto kv = CreateKVStore("local");
  ASSERT_TRUE(kv.ok());
  Tensor rows({2, 3});
  const std::vector<uint64_t> ids = {1, 2};
  EXPECT_EQ((*kv)->PullRows(7, ids, &rows).message(),
            "kvstore pull of rows of key 7 before its InitTable");
  EXPECT_EQ((*kv)->InitTable(7, SmallTable("adam")).message(),
            "no embedding optimizer 'adam': sgd, adagrad or lazy_adam");
  ASSERT_TRUE((*kv)->InitTable(7, SmallTable("sgd")).ok());
  EXPECT_EQ((*kv)->InitTable(7, SmallTable("sgd")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*kv)->PushRows(7, ids, rows).message(),
            "kvstore push of table C3 before SetOptimizer");
  Tensor wrong({3, 3});
  EXPECT_EQ((*kv)->PullRows(7, ids, &wrong).message(),
            "kvstore pull of 2 rows of table C3: F32 (3, 3), expected F32 (2, 3)");
  TableSpec no_rows = SmallTable("sgd");
  no_rows.rows = 0;
  EXPECT_EQ((*kv)->InitTable(8, no_rows).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort
