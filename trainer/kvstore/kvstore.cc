#include "trainer/kvstore/kvstore.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"
#include "trainer/kvstore/kvstore_mode.h"

namespace cohort {
namespace {

class LocalKVStore final : public KVStore {
 public:

  KVStoreMode mode() const override { return KVStoreMode::kLocal; }
  int rank() const override { return 0; }
  int num_workers() const override { return 1; }

  absl::Status SetOptimizer(const OptimizerSpec& spec) override {
    ASSIGN_OR_RETURN(optimizer_, MakeOptimizer(spec.optimizer, spec.optimizer_options));
    ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(spec.lr_schedule));
    schedule_ = std::move(schedule);
    return absl::OkStatus();
  }

  absl::Status Init(int64_t key, const Tensor& value) override {
    if (value.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("kvstore init of key ", key, ": ",
                                                     DTypeName(value.dtype()), ", not F32"));
    }
    Entry& e = entries_[key];
    e.value.assign(value.data<float>(), value.data<float>() + value.numel());
    e.shape = value.shape();
    e.steps = 0;
    e.auxiliary = false;
    return absl::OkStatus();
  }

  absl::Status InitAuxiliary(int64_t key, const Tensor& value) override {
    RETURN_IF_ERROR(Init(key, value));
    entries_[key].auxiliary = true;
    return absl::OkStatus();
  }

  absl::Status SetLearningRate(float lr) override {
    RETURN_IF_ERROR(CheckLearningRate(lr));
    lr_ = lr;
    return absl::OkStatus();
  }

  absl::Status Push(int64_t key, const Tensor& grad) override {
    ASSIGN_OR_RETURN(Entry * e, Find(key, grad, "push"));
    if (e->auxiliary) {  // the mean of one worker's push
      e->value.assign(grad.data<float>(), grad.data<float>() + grad.numel());
      return absl::OkStatus();
    }
    if (optimizer_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore push of key ", key, " before SetOptimizer"));
    }
    optimizer_->Update(key, absl::MakeSpan(e->value), grad.span<float>(),
                       lr_ >= 0 ? lr_ : static_cast<float>(schedule_->At(e->steps)));
    ++e->steps;
    return absl::OkStatus();
  }

  absl::Status Pull(int64_t key, Tensor* out) override {
    ASSIGN_OR_RETURN(Entry * e, Find(key, *out, "pull"));
    std::memcpy(out->raw(), e->value.data(), e->value.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status PushPull(int64_t key, const Tensor& grad, Tensor* out) override {
    RETURN_IF_ERROR(Push(key, grad));
    return Pull(key, out);
  }

  absl::Status Wait(int64_t key) override {
    if (!entries_.contains(key)) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore wait of key ", key, " before its init"));
    }
    return absl::OkStatus();
  }

  absl::Status Barrier() override { return absl::OkStatus(); }

  absl::Status InitTable(int64_t key, const TableSpec& spec) override {
    if (entries_.contains(key) || tables_.contains(key)) {
      return absl::AlreadyExistsError(
          absl::StrCat("kvstore table ", spec.name, ": key ", key, " is registered already"));
    }
    if (spec.dim < 1 || spec.rows < 0 ||
        (spec.kind == TableSpec::Kind::kFixed && spec.rows < 1) || spec.admit_after < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kvstore table ", spec.name, ": dim ", spec.dim, ", rows ", spec.rows, ", admit_after ",
          spec.admit_after, " (a row has 1 float or more; a fixed table 1 row or more)"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<RowOptimizer> rule,
                     MakeRowOptimizer(spec.optimizer, RowAdagradOptions{}, RowAdamOptions{}));
    Table& t = tables_[key];
    t.rule = std::move(rule);
    t.table = std::make_unique<EmbeddingTable>(spec, t.rule.get());
    return absl::OkStatus();
  }

  absl::Status PullRows(int64_t key, absl::Span<const uint64_t> ids, Tensor* out) override {
    ASSIGN_OR_RETURN(Table * t, FindTable(key, ids, *out, "pull"));
    return t->table->Pull(ids, out->span<float>());
  }

  absl::Status PushRows(int64_t key, absl::Span<const uint64_t> ids,
                        const Tensor& grads) override {
    ASSIGN_OR_RETURN(Table * t, FindTable(key, ids, grads, "push"));
    if (!schedule_.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore push of table ", t->table->spec().name, " before SetOptimizer"));
    }
    const float lr = lr_ >= 0 ? lr_ : static_cast<float>(schedule_->At(t->table->steps()));
    return t->table->Apply(ids, grads.span<float>(), lr);
  }

 private:
  struct Table {
    std::unique_ptr<RowOptimizer> rule;
    std::unique_ptr<EmbeddingTable> table;
  };

  // The table at key, for rows of ids in t (ids.size() × dim F32).
  absl::StatusOr<Table*> FindTable(int64_t key, absl::Span<const uint64_t> ids, const Tensor& t,
                                   absl::string_view what) {
    auto it = tables_.find(key);
    if (it == tables_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore ", what, " of rows of key ", key, " before its InitTable"));
    }
    const TableSpec& spec = it->second.table->spec();
    const Shape want{static_cast<int64_t>(ids.size()), spec.dim};
    if (t.shape() != want || t.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kvstore ", what, " of ", ids.size(), " rows of table ", spec.name, ": ",
          DTypeName(t.dtype()), " ", t.shape().ToString(), ", expected F32 ", want.ToString()));
    }
    return &it->second;
  }

  struct Entry {
    Shape shape;
    std::vector<float> value;
    int64_t steps = 0;  // pushes applied
    bool auxiliary = false;  // no optimizer: the value is the last push
  };

  absl::StatusOr<Entry*> Find(int64_t key, const Tensor& t, absl::string_view what) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kvstore ", what, " of key ", key, " before its init"));
    }
    if (t.shape() != it->second.shape || t.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kvstore ", what, " of key ", key, ": ", DTypeName(t.dtype()), " ", t.shape().ToString(),
          ", the key holds F32 ", it->second.shape.ToString()));
    }
    return &it->second;
  }

  std::unique_ptr<Optimizer> optimizer_;  // null until SetOptimizer
  std::optional<LrSchedule> schedule_;
  float lr_ = -1;  // SetLearningRate's (negative: the schedule's)
  absl::flat_hash_map<int64_t, Entry> entries_;
  absl::flat_hash_map<int64_t, Table> tables_;
};

}  // namespace

absl::Status KVStore::InitTable(int64_t key, const TableSpec& spec) {
  return absl::UnimplementedError(absl::StrCat(
      "kvstore ", type(), ": table ", spec.name, " (key ", key, "): this store serves no "
      "embedding tables yet; train the model with --kv_store=local"));
}

absl::Status KVStore::PullRows(int64_t key, absl::Span<const uint64_t>, Tensor*) {
  return absl::UnimplementedError(
      absl::StrCat("kvstore ", type(), ": no embedding table at key ", key));
}

absl::Status KVStore::PushRows(int64_t key, absl::Span<const uint64_t>, const Tensor&) {
  return absl::UnimplementedError(
      absl::StrCat("kvstore ", type(), ": no embedding table at key ", key));
}

absl::Status CheckLearningRate(float lr) {
  if (std::isfinite(lr)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "kvstore: learning rate ", lr, "; give a finite rate (negative: the schedule's)"));
}

absl::StatusOr<std::unique_ptr<KVStore>> CreateKVStore(absl::string_view type) {
  const absl::StatusOr<KVStoreMode> mode = ParseKVStoreMode(type);
  if (!mode.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_store=", type, ": expected local, dist_sync or dist_async"));
  }
  if (*mode != KVStoreMode::kLocal) {
    return absl::UnimplementedError(absl::StrCat(
        "--kv_store=", type, ": the distributed kvstores run in workers (bazel run "
        "//services:worker, or //tools:launch); this process supports --kv_store=local"));
  }
  return std::unique_ptr<KVStore>(new LocalKVStore());
}

}  // namespace cohort
