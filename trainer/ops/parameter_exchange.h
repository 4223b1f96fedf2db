#ifndef COHORT_TRAINER_OPS_PARAMETER_EXCHANGE_H_
#define COHORT_TRAINER_OPS_PARAMETER_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <vector>

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
  // Where the kvstore writes the key's next value (F32 on the host).
  virtual Tensor* HostValue(int64_t key) = 0;
  // HostValue holds the key's new value: move it into the parameter, ahead of the next reads.
  virtual void ReceiveValue(int64_t key) = 0;
};

// The exchange of parameters that already are F32 host tensors: the kvstore reads the gradient
// and writes the value in place; nothing moves.
std::unique_ptr<ParameterExchange> MakeInPlaceExchange(std::vector<ParameterTensors> params);

}  // namespace cohort

#endif  // COHORT_TRAINER_OPS_PARAMETER_EXCHANGE_H_
