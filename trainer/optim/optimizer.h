#ifndef COHORT_TRAINER_OPTIM_OPTIMIZER_H_
#define COHORT_TRAINER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace cohort {

// Updates flat fp32 weights from their gradients. Each key (a parameter, or a part of one on a
// parameter shard) has its own optimizer state, created on its first update, so the trainer
// and the shards run the same code on whole tensors or on parts. An update can be applied in
// slices: a shard applies a gradient block by block as it comes off the network, while the
// block is still in cache; the result is bitwise the same as one whole update. Not
// thread-safe.
// One key's optimizer state, for checkpoints: named tensors of the key's size (SGD's
// "velocity"; Adam's "m" and "v") and the number of updates applied (Adam's t).
struct OptimizerState {
  std::map<std::string, std::vector<float>> tensors;
  int64_t updates = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Starts one update of key, which has `size` elements (the same for every update of a key).
  virtual void BeginUpdate(int64_t key, int64_t size) = 0;
  // Applies the update begun last for key to its elements [offset, offset + weight.size());
  // the slices of one update cover the key exactly once. weight and grad: that slice.
  virtual void Apply(int64_t key, int64_t offset, absl::Span<float> weight,
                     absl::Span<const float> grad, float lr) = 0;
  // One update of the whole key.
  void Update(int64_t key, absl::Span<float> weight, absl::Span<const float> grad, float lr);
  // The key's state (empty before its first update, or when the rule keeps none).
  virtual OptimizerState SaveState(int64_t key) const = 0;
  // Replaces the key's state with one SaveState returned for a key of `size` elements, so that
  // the next updates are bitwise those the saved optimizer would have made. InvalidArgument
  // naming the tensor when a tensor is missing, unknown or of another size.
  virtual absl::Status LoadState(int64_t key, int64_t size, const OptimizerState& state) = 0;
};

struct SgdOptions {
  float momentum = 0.0f;
  float weight_decay = 0.0f;
};

// SGD with momentum and L2 weight decay, as PyTorch's torch.optim.SGD (dampening 0):
//   g = grad + wd·w;  v = momentum·v + g;  w -= lr·v
class Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdOptions options) : options_(options) {}
  void BeginUpdate(int64_t key, int64_t size) override;
  void Apply(int64_t key, int64_t offset, absl::Span<float> weight, absl::Span<const float> grad,
             float lr) override;
  OptimizerState SaveState(int64_t key) const override;
  absl::Status LoadState(int64_t key, int64_t size, const OptimizerState& state) override;

 private:
  SgdOptions options_;
  absl::flat_hash_map<int64_t, std::vector<float>> velocity_;
};

// Doubles because the bias corrections 1 - β^t lose precision when β is rounded to float.
struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// Adam with L2 weight decay, as PyTorch's torch.optim.Adam (amsgrad off). Per key, with t the
// number of updates of that key so far (1 on its first update):
//   g = grad + wd·w;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//   w -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps)
class Adam final : public Optimizer {
 public:
  explicit Adam(AdamOptions options) : options_(options) {}
  void BeginUpdate(int64_t key, int64_t size) override;
  void Apply(int64_t key, int64_t offset, absl::Span<float> weight, absl::Span<const float> grad,
             float lr) override;
  OptimizerState SaveState(int64_t key) const override;
  absl::Status LoadState(int64_t key, int64_t size, const OptimizerState& state) override;

 private:
  struct State {
    int64_t t = 0;
    std::vector<float> m, v;
    // The bias corrections of update t: 1-β1^t and sqrt(1-β2^t).
    double bias1 = 0;
    float bias2_sqrt = 0;
  };
  AdamOptions options_;
  absl::flat_hash_map<int64_t, State> state_;
};

// Everything MakeOptimizer needs, whichever optimizer it builds.
struct OptimizerOptions {
  double momentum = 0.0;      // --momentum; sgd only (adam ignores it)
  double weight_decay = 0.0;  // --wd
  double beta1 = 0.9;         // adam only
  double beta2 = 0.999;       // adam only
  double eps = 1e-8;          // adam only
};

// The optimizer a --optimizer value names: "sgd" or "adam". InvalidArgument for another name or
// for an option out of range (momentum, betas in [0, 1); weight decay >= 0; eps > 0).
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(absl::string_view name,
                                                         const OptimizerOptions& options);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPTIM_OPTIMIZER_H_
