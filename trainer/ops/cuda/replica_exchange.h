#ifndef COHORT_TRAINER_OPS_CUDA_REPLICA_EXCHANGE_H_
#define COHORT_TRAINER_OPS_CUDA_REPLICA_EXCHANGE_H_

#include <cuda_runtime.h>

#include <vector>

#include "trainer/ops/cuda/cuda_context.h"
#include "trainer/ops/parameter_exchange.h"

namespace cohort::cuda {

// The replicas of one model on several GPUs, their gradients summed on the first replica's GPU
// rather than on the host:
//  - once every replica's backward has written a key's gradient (GradientDone records an event
//    on its compute stream), a stream of the first GPU waits for all of them, copies the other
//    replicas' gradients over (peer copies: straight over NVLink or PCIe where the GPUs reach
//    each other), sums them in replica order with their weights into fp32 (WeightedSumToF32,
//    the host reduction's bits) and copies the sum into a pinned host buffer: one gradient per
//    key crosses to the host, not one per GPU;
//  - pulled values go up to every GPU from one pinned buffer, each on its replica's compute
//    stream (after the reduction has read the replica's gradient, before its next forward),
//    cast to the replica's storage type.
// No loss scaling (fp32, tf32, bf16): fp16 replicas go through the host (HostExchange scales and
// checks each one). Keys index the parameter lists; the ReplicaExchange threading contract.
class DeviceReplicaExchange final : public ReplicaExchange {
 public:
  // contexts: each replica's GPU context (the first sums); params: by replica, the same shapes
  // and storage type on each replica's GPU.
  DeviceReplicaExchange(std::vector<CudaContext*> contexts,
                        std::vector<std::vector<ParameterTensors>> params);
  ~DeviceReplicaExchange() override;
  DeviceReplicaExchange(const DeviceReplicaExchange&) = delete;
  DeviceReplicaExchange& operator=(const DeviceReplicaExchange&) = delete;

  float BeginStep(int) override { return 1.0f; }
  void GradientDone(int r, int64_t key) override;
  void Reduce(int64_t key, absl::Span<const float> weights) override;
  bool GradientArrived(int64_t key) override;
  const Tensor& HostGradient(int64_t key) override;
  Tensor* HostValue(int64_t key) override;
  void ReceiveValue(int r, int64_t key) override;

 private:
  struct Slot {
    std::vector<ParameterTensors> params;  // by replica
    std::vector<Tensor> copies;  // on the first GPU, by replica: the gradients copied over
    Tensor sum;                  // fp32, on the first GPU
    Tensor host_grad, host_value;    // pinned fp32
    std::vector<Tensor> device_f32;  // by replica: a 16-bit value's fp32 upload (else empty)
    std::vector<cudaEvent_t> grad_done;   // by replica, its GPU: backward wrote the gradient
    std::vector<cudaEvent_t> value_read;  // by replica, its GPU: its upload read host_value
    cudaEvent_t grads_read = nullptr;  // first GPU: the copies and the sum read every gradient
    cudaEvent_t sum_copied = nullptr;  // first GPU: the sum is on the host
  };

  int first_device() const { return contexts_[0]->device(); }

  const std::vector<CudaContext*> contexts_;
  cudaStream_t reduce_stream_ = nullptr;  // on the first GPU
  std::vector<Slot> slots_;
};

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_REPLICA_EXCHANGE_H_
