#include "trainer/ops/cuda/cuda_backend.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"
#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/ops/cuda/host_exchange.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/cuda/replica_exchange.h"
#include "trainer/ops/cuda/elem_of.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  auto shared = std::make_shared<Shared>();
  ASSIGN_OR_RETURN(shared->ctx, CudaContext::Create(options.device));
  shared->options = options;
  shared->dtype = StorageDType(options.precision);
  shared->conv_dw_staging = Tensor(Shape{0}, shared->dtype, shared->ctx->allocator());
  if (options.precision == Precision::kTf32) {
    COHORT_CUBLAS_CHECK(cublasSetMathMode(shared->ctx->cublas(), CUBLAS_TF32_TENSOR_OP_MATH));
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(shared)));
}

CudaBackend::CudaBackend(std::shared_ptr<Shared> shared)
    : shared_(std::move(shared)),
      image_staging_(Shape{0}, DType::kF32, PinnedAllocator()),
      label_staging_(Shape{0}, DType::kI32, PinnedAllocator()),
      image_upload_(Shape{0}, DType::kF32, shared_->ctx->allocator()),
      image_nhwc_(Shape{0}, DType::kF32, shared_->ctx->allocator()),
      label_upload_(Shape{0}, DType::kI32, shared_->ctx->allocator()) {
  for (cudaEvent_t* e : {&uploaded_, &image_consumed_, &label_consumed_}) {
    COHORT_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }
}

CudaBackend::~CudaBackend() {
  shared_->ctx->Synchronize();
  for (cudaEvent_t e : {uploaded_, image_consumed_, label_consumed_}) cudaEventDestroy(e);
}

DType CudaBackend::dtype() const { return shared_->dtype; }
Allocator* CudaBackend::allocator() const { return shared_->ctx->allocator(); }
Allocator* CudaBackend::host_allocator() const { return PinnedAllocator(); }
void CudaBackend::BindCallingThread() { shared_->ctx->MakeCurrent(); }
const CudaBackendOptions& CudaBackend::options() const { return shared_->options; }
CudaContext* CudaBackend::context() const { return shared_->ctx.get(); }

void CudaBackend::Upload(const Tensor& host, Tensor* staging, Tensor* device,
                         cudaEvent_t consumed) {
  COHORT_CHECK(host.device().kind == Device::Kind::kCpu && host.dtype() == device->dtype(),
               "upload of a %s tensor on %s", std::string(DTypeName(host.dtype())).c_str(),
               host.device().ToString().c_str());
  CudaContext& ctx = *shared_->ctx;
  const void* before = device->raw();
  device->Resize(host.shape());
  if (device->raw() != before) {
    // A new block may be one the compute stream freed and still uses: start after its work.
    COHORT_CUDA_CHECK(cudaEventRecord(consumed, ctx.stream()));
  }
  if (host.nbytes() == 0) return;
  // The compute stream must be done reading the last upload before this one overwrites it.
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(ctx.copy_stream(), consumed, 0));
  const void* src = host.raw();
  if (!IsPinned(src)) {
    // The previous upload must be done reading the staging buffer before it is rewritten.
    COHORT_CUDA_CHECK(cudaEventSynchronize(uploaded_));
    staging->Resize(host.shape());
    std::memcpy(staging->raw(), src, host.nbytes());
    src = staging->raw();
  }
  COHORT_CUDA_CHECK(cudaMemcpyAsync(device->raw(), src, host.nbytes(), cudaMemcpyHostToDevice,
                                    ctx.copy_stream()));
  COHORT_CUDA_CHECK(cudaEventRecord(uploaded_, ctx.copy_stream()));
  COHORT_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), uploaded_, 0));
}

const Tensor& CudaBackend::ImportImages(const Tensor& images, Tensor* scratch) {
  if (images.device().kind == Device::Kind::kCuda) return images;
  const Shape& x = images.shape();
  COHORT_CHECK(x.rank() == 4 && images.dtype() == DType::kF32,
               "the GPU backend takes F32 (N, C, H, W) images, not %s %s",
               std::string(DTypeName(images.dtype())).c_str(), x.ToString().c_str());
  Upload(images, &image_staging_, &image_upload_, image_consumed_);
  scratch->Resize(x);
  const Shared& s = *shared_;
  const void* src = image_upload_.raw();
  if (s.nhwc()) {
    void* dst = s.dtype == DType::kF32 ? scratch->raw() : (image_nhwc_.Resize(x), image_nhwc_.raw());
    COHORT_CUDA_CHECK(NcsToNsc(src, x[0], x[1], x[2] * x[3], dst, Elem::kF32, s.stream()));
    src = dst;
  }
  if (src != scratch->raw()) {
    COHORT_CUDA_CHECK(Cast(src, Elem::kF32, scratch->raw(), s.elem(), images.numel(), s.stream()));
  }
  COHORT_CUDA_CHECK(cudaEventRecord(image_consumed_, s.stream()));
  return *scratch;
}

const Tensor& CudaBackend::ImportLabels(const Tensor& labels, Tensor* scratch) {
  if (labels.device().kind == Device::Kind::kCuda) return labels;
  Upload(labels, &label_staging_, &label_upload_, label_consumed_);
  // The loss reads its own copy, so the next upload need not wait for this step's backward.
  scratch->Resize(labels.shape());
  COHORT_CUDA_CHECK(cudaMemcpyAsync(scratch->raw(), label_upload_.raw(), labels.nbytes(),
                                    cudaMemcpyDeviceToDevice, shared_->stream()));
  COHORT_CUDA_CHECK(cudaEventRecord(label_consumed_, shared_->stream()));
  return *scratch;
}

std::unique_ptr<ReplicaExchange> CudaBackend::MakeReplicaExchange(
    const std::vector<Backend*>& backends, std::vector<std::vector<ParameterTensors>> params) {
  if (shared_->options.precision == Precision::kFp16 || backends.size() > kMaxReplicaTerms) {
    return nullptr;
  }
  std::vector<CudaContext*> contexts;
  for (Backend* backend : backends) {
    auto* gpu = dynamic_cast<CudaBackend*>(backend);
    if (gpu == nullptr || gpu->dtype() != dtype()) return nullptr;
    contexts.push_back(gpu->context());
  }
  return std::make_unique<DeviceReplicaExchange>(std::move(contexts), std::move(params));
}

std::unique_ptr<ParameterExchange> CudaBackend::MakeParameterExchange(
    std::vector<ParameterTensors> params) {
  LossScaleOptions loss_scale;
  loss_scale.enabled = shared_->options.precision == Precision::kFp16;
  return std::make_unique<HostExchange>(shared_->ctx.get(), std::move(params), loss_scale);
}

std::unique_ptr<Op> CudaBackend::Conv2d(const Conv2dSpec& spec) {
  return MakeConvOp(shared_, spec);
}
std::unique_ptr<Op> CudaBackend::MaxPool2d(const Pool2dSpec& spec) {
  return MakePoolOp(shared_, PoolKind::kMax, spec);
}
std::unique_ptr<Op> CudaBackend::AvgPool2d(const Pool2dSpec& spec) {
  return MakePoolOp(shared_, PoolKind::kAvg, spec);
}
std::unique_ptr<Op> CudaBackend::GlobalAvgPool() {
  return MakePoolOp(shared_, PoolKind::kGlobalAvg, Pool2dSpec{});
}
std::unique_ptr<Op> CudaBackend::BatchNorm(const BatchNormSpec& spec) {
  return MakeBatchNormOp(shared_, spec, /*relu=*/false);
}
std::unique_ptr<Op> CudaBackend::Add() { return MakeAddOp(shared_); }
std::unique_ptr<Op> CudaBackend::Concat() { return MakeConcatOp(shared_); }
std::unique_ptr<Op> CudaBackend::Dropout(const DropoutSpec& spec) {
  return MakeDropoutOp(shared_, spec);
}
std::unique_ptr<Op> CudaBackend::SubsamplePad(const SubsamplePadSpec& spec) {
  return MakeSubsamplePadOp(shared_, spec);
}
std::unique_ptr<Op> CudaBackend::Relu() { return MakeReluOp(shared_); }
std::unique_ptr<Op> CudaBackend::FuseRelu(const Op& op) {
  if (op.name() == "add") return MakeAddReluOp(shared_);
  // cuDNN fuses the ReLU in its persistent mode only (16-bit activations, channels last).
  const Shared& s = *shared_;
  if (op.name() == "batch_norm" && s.options.fuse_batch_norm_relu && s.nhwc() &&
      s.dtype != DType::kF32) {
    return MakeBatchNormOp(shared_, static_cast<const BatchNormFrame&>(op).spec(),
                           /*relu=*/true);
  }
  return nullptr;
}
std::unique_ptr<Op> CudaBackend::Linear() { return MakeLinearOp(shared_); }
std::unique_ptr<Op> CudaBackend::Flatten() {
  return MakeFlattenOp(shared_, Backend::Flatten());
}
std::unique_ptr<Op> CudaBackend::SoftmaxCrossEntropy() {
  return MakeSoftmaxCrossEntropyOp(shared_);
}

namespace {

// An op with no CUDA kernel yet. A model is built by asking every op for its output shapes
// first: this one's answer stops it there, before any tensor of it reaches a kernel.
class NoKernelOp final : public Op {
 public:
  explicit NoKernelOp(absl::string_view name) : name_(name) {}
  absl::string_view name() const override { return name_; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape>) const override {
    return absl::UnimplementedError(absl::StrCat(
        name_, ": the CUDA backend has none yet; train a click model (embedding tables) on "
        "CPU workers (--devices=cpu)"));
  }
  void Forward(Mode, absl::Span<const Tensor* const>, absl::Span<Tensor* const>) override {
    COHORT_CHECK(false, "%s: no CUDA kernel (OutputShapes refused)", name_.c_str());
  }
  void Backward(absl::Span<const Tensor* const>, absl::Span<const Tensor* const>,
                absl::Span<const Tensor* const>, absl::Span<Tensor* const>) override {
    COHORT_CHECK(false, "%s: no CUDA kernel (OutputShapes refused)", name_.c_str());
  }

 private:
  const std::string name_;
};

}  // namespace

std::unique_ptr<Op> CudaBackend::EmbeddingBag(const EmbeddingBagSpec&) {
  return std::make_unique<NoKernelOp>("embedding_bag");
}
std::unique_ptr<Op> CudaBackend::DotInteraction() {
  return std::make_unique<NoKernelOp>("dot_interaction");
}
std::unique_ptr<Op> CudaBackend::BinaryCrossEntropy() {
  return std::make_unique<NoKernelOp>("binary_cross_entropy");
}

}  // namespace cohort::cuda
