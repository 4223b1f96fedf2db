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
