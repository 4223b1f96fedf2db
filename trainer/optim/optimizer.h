#ifndef COHORT_TRAINER_OPTIM_OPTIMIZER_H_
#define COHORT_TRAINER_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace cohort {

// Updates flat fp32 weights from their gradients. Each key (a parameter, or a part of one on a
// parameter shard) has its own optimizer state, created on its first update, so the trainer
// and the shards run the same code on whole tensors or on parts. Not thread-safe.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // weight and grad have the same length for every update of a key.
  virtual void Update(int64_t key, absl::Span<float> weight, absl::Span<const float> grad,
                      float lr) = 0;
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
  void Update(int64_t key, absl::Span<float> weight, absl::Span<const float> grad,
              float lr) override;

 private:
  SgdOptions options_;
  absl::flat_hash_map<int64_t, std::vector<float>> velocity_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_OPTIM_OPTIMIZER_H_
