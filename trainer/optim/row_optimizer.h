#ifndef COHORT_TRAINER_OPTIM_ROW_OPTIMIZER_H_
#define COHORT_TRAINER_OPTIM_ROW_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// Updates the rows of an embedding table that a step touched, and only those: a batch touches
// a few thousand of millions of rows, and an untouched row keeps its value and its state (a
// dense optimizer would move every row by its momentum, and read the whole table each step).
// The rule is stateless; each row's state lives beside it, where the table keeps its rows
// (state_floats() floats a row element), so memory is the rows and their state and nothing
// per row elsewhere. Thread-safe: rows of one table may be updated in parallel.
class RowOptimizer {
 public:
  virtual ~RowOptimizer() = default;
  virtual absl::string_view name() const = 0;
  // Floats of state per element of a row (SGD 0, Adagrad 1, lazy Adam 2).
  virtual int state_floats() const = 0;
  // A row's state before its first update, into state (state_floats() · D floats).
  virtual void InitState(absl::Span<float> state) const = 0;
  // One update of a row: weight and grad (D floats each; grad the step's gradient of the row,
  // summed over the workers and scaled as the dense parameters' are), state the row's own.
  // step: the table's update count, 1 on its first (lazy Adam's bias corrections use it, as
  // PyTorch's SparseAdam uses its step count, whether the row was touched before or not).
  virtual void ApplyRow(absl::Span<float> weight, absl::Span<const float> grad,
                        absl::Span<float> state, float lr, int64_t step) const = 0;
};

// w -= lr · g: PyTorch's SGD on a sparse gradient (no momentum: a table's rows have none).
class RowSgd final : public RowOptimizer {
 public:
  absl::string_view name() const override { return "sgd"; }
  int state_floats() const override { return 0; }
  void InitState(absl::Span<float>) const override {}
  void ApplyRow(absl::Span<float> weight, absl::Span<const float> grad, absl::Span<float> state,
                float lr, int64_t step) const override;
};

struct RowAdagradOptions {
  float initial_accumulator = 0.0f;
  float eps = 1e-10f;
};

// PyTorch's Adagrad on a sparse gradient: s += g²;  w -= lr · g / (sqrt(s) + eps). The usual
// rule for embeddings: a rare row keeps a large step.
class RowAdagrad final : public RowOptimizer {
 public:
  explicit RowAdagrad(RowAdagradOptions options) : options_(options) {}
  absl::string_view name() const override { return "adagrad"; }
  int state_floats() const override { return 1; }
  void InitState(absl::Span<float> state) const override;
  void ApplyRow(absl::Span<float> weight, absl::Span<const float> grad, absl::Span<float> state,
                float lr, int64_t step) const override;

 private:
  const RowAdagradOptions options_;
};

struct RowAdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Lazy Adam, as PyTorch's SparseAdam: only a touched row's moments move (m and v, interleaved
// in its state: m0 v0 m1 v1 ...), with the bias corrections of the table's step t:
//   m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²;  w -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) +
//   eps)
class RowAdam final : public RowOptimizer {
 public:
  explicit RowAdam(RowAdamOptions options) : options_(options) {}
  absl::string_view name() const override { return "lazy_adam"; }
  int state_floats() const override { return 2; }
  void InitState(absl::Span<float> state) const override;
  void ApplyRow(absl::Span<float> weight, absl::Span<const float> grad, absl::Span<float> state,
                float lr, int64_t step) const override;

 private:
  const RowAdamOptions options_;
};

// The row optimizer a table's --embedding_optimizer names: "sgd", "adagrad" or "lazy_adam"
// (InvalidArgument for another, naming them; or for an option out of range).
absl::StatusOr<std::unique_ptr<RowOptimizer>> MakeRowOptimizer(absl::string_view name,
                                                               const RowAdagradOptions& adagrad,
                                                               const RowAdamOptions& adam);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPTIM_ROW_OPTIMIZER_H_
