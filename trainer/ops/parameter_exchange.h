#ifndef COHORT_TRAINER_OPS_PARAMETER_EXCHANGE_H_
#define COHORT_TRAINER_OPS_PARAMETER_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "trainer/tensor/tensor.h"

namespace cohort {

// A parameter's value and gradient tensors, as a backend sees them.
struct ParameterTensors {
  Tensor* value;
  Tensor* grad;
};

// Carries the parameters of a model to and from a kvstore on the host, which holds F32 host
// tensors: through host copies for a model on a device, in place for one that already holds F32
// host tensors. Keys index the parameter list it was made for. Used from one thread at a time.
class ParameterExchange {
 public:
  virtual ~ParameterExchange() = default;
  // Called before each step: returns what the loss gradient is multiplied by in this step
  // (fp16 loss scaling; 1 otherwise), having taken in what the last step's gradients showed.
  virtual float BeginStep() { return 1.0f; }
  // The key's gradient is final on the device: start moving it to the host.
  virtual void SendGradient(int64_t key) = 0;
  // Whether that move is done, without waiting.
  virtual bool GradientArrived(int64_t key) = 0;
  // The key's gradient on the host (F32), once it has arrived (waits for it).
  virtual const Tensor& HostGradient(int64_t key) = 0;
  // Whether the last HostGradient of the key came as zeros in place of a gradient that
  // overflowed (fp16 loss scaling).
  virtual bool GradientZeroed(int64_t key) { return false; }
  // Where the kvstore writes the key's next value (F32 on the host).
  virtual Tensor* HostValue(int64_t key) = 0;
  // HostValue holds the key's new value: move it into the parameter, ahead of the next reads.
  virtual void ReceiveValue(int64_t key) = 0;
};

// The exchange of parameters that already are F32 host tensors: the kvstore reads the gradient
// and writes the value in place; nothing moves.
std::unique_ptr<ParameterExchange> MakeInPlaceExchange(std::vector<ParameterTensors> params);

// Carries the parameters of R replicas of one model (one per device context, each training on a
// slice of the batch) to and from a kvstore on the host as those of one model: a key's
// gradients summed, weighted by slice size, in replica order, into one F32 host gradient; each
// pulled value handed to every replica. Calls naming a replica come from that replica's thread
// (the one its backend is bound to); the others from any thread; one call at a time, except
// BeginStep, which the replicas call at once (each touching its own state).
class ReplicaExchange {
 public:
  virtual ~ReplicaExchange() = default;
  // Before replica r's step: what its loss gradient is multiplied by in this step.
  virtual float BeginStep(int r) = 0;
  // Replica r's gradient of key is final on its device.
  virtual void GradientDone(int r, int64_t key) = 0;
  // Every replica's gradient of key is final: start their sum Σ weights[r] · g_r (r = 0, 1, ...
  // in that order) towards the host.
  virtual void Reduce(int64_t key, absl::Span<const float> weights) = 0;
  // Whether that sum is on the host, without waiting.
  virtual bool GradientArrived(int64_t key) = 0;
  // The sum (F32 on the host), once it has arrived (waits for it).
  virtual const Tensor& HostGradient(int64_t key) = 0;
  // Where the kvstore writes the key's next value (F32 on the host).
  virtual Tensor* HostValue(int64_t key) = 0;
  // HostValue holds the key's new value: replica r takes it, ahead of its next reads.
  virtual void ReceiveValue(int r, int64_t key) = 0;
};

// The replicas' exchange through each one's own ParameterExchange (`exchanges`, by replica): every
// gradient comes down and the host sums them (zeros where any replica's overflowed, as one
// replica pushes); replica 0's host value is copied into the others'. The reference for a
// device's own reduction (Backend::MakeReplicaExchange).
std::unique_ptr<ReplicaExchange> MakeHostReplicaExchange(
    std::vector<std::unique_ptr<ParameterExchange>> exchanges);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_PARAMETER_EXCHANGE_H_
