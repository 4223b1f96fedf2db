#ifndef COHORT_TRAINER_OPS_CUDA_CUDA_BACKEND_H_
#define COHORT_TRAINER_OPS_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "trainer/ops/cuda/cuda_context.h"
#include "trainer/ops/op.h"
#include "trainer/ops/precision.h"

namespace cohort::cuda {

struct CudaBackendOptions {
  int device = 0;
  Precision precision = Precision::kFp32;
  // Activations stored channels-last (NHWC), the layout the tensor cores' convolutions and
  // batch norms run fastest in; their shapes still read (N, C, H, W). Parameters stay in the
  // plain PyTorch layouts whatever the activations' layout.
  bool channels_last = true;
  // Only convolution algorithms that give the same bits every run (no atomic sums), chosen by
  // number rather than by timing, as PyTorch's cudnn.deterministic: reproducible steps, at
  // some cost in speed.
  bool deterministic = false;
  // Batch norm and the ReLU after it as one cuDNN call (CUDNN_BATCHNORM_OPS_BN_ACTIVATION),
  // where cuDNN has it: 16-bit precisions, channels last (ResNet-50 bf16 on an H200: 5,479
  // img/s against 5,213 unfused, docs/benchmarks.md).
  bool fuse_batch_norm_relu = true;
};

// The GPU backend: cuDNN 9 for convolution, pooling and batch norm, cuBLAS for linear
// layers, kernels of its own for the rest (trainer/ops/cuda/kernels.h). Tensors live on one GPU
// in the precision's storage dtype; every op runs in order on the context's compute stream,
// without waiting for it, so the host queues a whole step ahead of the GPU (reading the loss
// waits). Convolutions use cuDNN's legacy API with the algorithm cudnnFind picks for each
// shape on first use, all sharing the context's workspace; batch norm keeps its scale, shift
// and running statistics in fp32 as cuDNN requires. Primitives and buffers are made once per
// shape, so the steady-state step allocates nothing.
class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  absl::string_view name() const override { return "cudnn"; }
  DType dtype() const override;
  Allocator* allocator() const override;
  Allocator* host_allocator() const override;
  void BindCallingThread() override;
  // Host batches go up through pinned memory on the copy stream (straight from the caller's
  // buffer when it is pinned: the caller leaves it untouched until the step's loss is read),
  // then are converted to the storage dtype and layout on the compute stream. Tensors already
  // on this GPU are taken as they are.
  const Tensor& ImportImages(const Tensor& images, Tensor* scratch) override;
  const Tensor& ImportLabels(const Tensor& labels, Tensor* scratch) override;
  // A HostExchange: gradients leave through pinned fp32 buffers as they are ready.
  // Several GPU replicas (fp32, tf32, bf16) sum their gradients on the first GPU
  // (DeviceReplicaExchange); fp16 ones, which scale their losses, through the host.
  std::unique_ptr<ReplicaExchange> MakeReplicaExchange(
      const std::vector<Backend*>& backends,
      std::vector<std::vector<ParameterTensors>> params) override;
  std::unique_ptr<ParameterExchange> MakeParameterExchange(
      std::vector<ParameterTensors> params) override;

  std::unique_ptr<Op> Conv2d(const Conv2dSpec& spec) override;
  std::unique_ptr<Op> MaxPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> AvgPool2d(const Pool2dSpec& spec) override;
  std::unique_ptr<Op> GlobalAvgPool() override;
  std::unique_ptr<Op> BatchNorm(const BatchNormSpec& spec) override;
  std::unique_ptr<Op> Add() override;
  std::unique_ptr<Op> Concat() override;
  std::unique_ptr<Op> Dropout(const DropoutSpec& spec) override;
  std::unique_ptr<Op> SubsamplePad(const SubsamplePadSpec& spec) override;
  std::unique_ptr<Op> Relu() override;
  // A sum's ReLU (AddRelu); batch norm's with fuse_batch_norm_relu.
  std::unique_ptr<Op> FuseRelu(const Op& op) override;
  std::unique_ptr<Op> Linear() override;
  std::unique_ptr<Op> Flatten() override;
  std::unique_ptr<Op> SoftmaxCrossEntropy() override;
  // A click model's ops: none on the GPU yet; each refuses the model that asks for it, saying
  // so.
  std::unique_ptr<Op> EmbeddingBag(const EmbeddingBagSpec& spec) override;
  std::unique_ptr<Op> DotInteraction() override;
  std::unique_ptr<Op> BinaryCrossEntropy() override;

  const CudaBackendOptions& options() const;
  CudaContext* context() const;

  struct Shared;  // the context and options, shared with the ops this backend makes

 private:
  explicit CudaBackend(std::shared_ptr<Shared> shared);
  // Host → device on the copy stream, then the compute stream waits for it.
  // staging: pinned, used when host is not. consumed: recorded on the compute stream once it
  // is done with *device's last contents.
  void Upload(const Tensor& host, Tensor* staging, Tensor* device, cudaEvent_t consumed);

  std::shared_ptr<Shared> shared_;
  Tensor image_staging_, label_staging_;  // pinned
  Tensor image_upload_;                   // F32 NCHW on the device
  Tensor image_nhwc_;                     // F32 NHWC, before the cast to 16 bits
  Tensor label_upload_;                   // I32 on the device
  cudaEvent_t uploaded_ = nullptr;
  cudaEvent_t image_consumed_ = nullptr, label_consumed_ = nullptr;
};

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_CUDA_BACKEND_H_
