#include "trainer/ops/cuda/cuda_backend.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trainer/base/status_macros.h"
#include "trainer/ops/cuda/conv_op.h"
#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/host_exchange.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/cuda/replica_exchange.h"
#include "trainer/ops/cuda/elem_of.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {

namespace {

// RAII wrappers of cuDNN descriptors (TensorDesc: cuda_backend_shared.h).
class PoolDesc {
 public:
  PoolDesc() { COHORT_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d_)); }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  cudnnPoolingDescriptor_t get() const { return d_; }

 private:
  cudnnPoolingDescriptor_t d_;
};

// A ReLU for the ops cuDNN fuses one into.
class ReluDesc {
 public:
  ReluDesc() {
    COHORT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d_));
    COHORT_CUDNN_CHECK(
        cudnnSetActivationDescriptor(d_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  ~ReluDesc() { cudnnDestroyActivationDescriptor(d_); }
  ReluDesc(const ReluDesc&) = delete;
  ReluDesc& operator=(const ReluDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return d_; }

 private:
  cudnnActivationDescriptor_t d_;
};

// The shape an op last prepared for, so descriptors are rebuilt only when it changes.
class LastShape {
 public:
  // True (and remembers s) when s differs from the last one.
  bool Changed(const Shape& s) {
    if (valid_ && s == shape_) return false;
    shape_ = s;
    valid_ = true;
    return true;
  }

 private:
  Shape shape_;
  bool valid_ = false;
};

void CopyOnStream(const Shared& s, void* dst, const void* src, size_t bytes) {
  COHORT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s.stream()));
}

// ----------------------------------------------------------------------------------------
// Pooling: max, average (padding counted, as the reference) and global average, which is an
// average over the whole image whose (N, C, 1, 1) output is (N, C) in either layout. cuDNN pads
// both sides alike, so max pooling whose ceil_mode adds windows past the right padding runs as
// a kernel of its own (MaxPoolForward), keeping its argmax for the backward.

class PoolOp final : public Pool2dFrame {
 public:
  PoolOp(std::shared_ptr<Shared> s, PoolKind kind, Pool2dSpec spec)
      : Pool2dFrame(kind, spec),
        s_(std::move(s)),
        argmax_(Shape{0}, DType::kI32, s_->ctx->allocator()) {}

  void Forward(Mode, Ins in, Outs out) override {
    Prepare(in[0]->shape());
    if (direct_) {
      COHORT_CUDA_CHECK(MaxPoolForward(Ptr(in[0]), windows_, s_->nhwc(), Ptr(out[0]),
                                       static_cast<int32_t*>(Ptr(&argmax_)), s_->elem(),
                                       s_->stream()));
      return;
    }
    COHORT_CUDNN_CHECK(cudnnPoolingForward(s_->ctx->cudnn(), pool_.get(), &kOne, x_.get(),
                                           Ptr(in[0]), &kZero, y_.get(), Ptr(out[0])));
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    Prepare(in[0]->shape());
    if (direct_) {
      COHORT_CUDA_CHECK(MaxPoolBackward(Ptr(grad_out[0]),
                                        static_cast<const int32_t*>(Ptr(&argmax_)), windows_,
                                        s_->nhwc(), Ptr(grad_in[0]), s_->elem(), s_->stream()));
      return;
    }
    COHORT_CUDNN_CHECK(cudnnPoolingBackward(s_->ctx->cudnn(), pool_.get(), &kOne, y_.get(),
                                            Ptr(out[0]), y_.get(), Ptr(grad_out[0]), x_.get(),
                                            Ptr(in[0]), &kZero, x_.get(), Ptr(grad_in[0])));
  }

 private:
  void Prepare(const Shape& x) {
    if (!last_.Changed(x)) return;
    int kh = spec_.kernel, kw = spec_.kernel, stride_h = spec_.stride, stride_w = spec_.stride;
    int pad = spec_.padding;
    int64_t oh = 1, ow = 1;
    direct_ = false;
    if (kind_ == PoolKind::kGlobalAvg) {
      kh = stride_h = static_cast<int>(x[2]);
      kw = stride_w = static_cast<int>(x[3]);
      pad = 0;
    } else {
      oh = Pool2dOutputSize(spec_, x[2]);
      ow = Pool2dOutputSize(spec_, x[3]);
      const Pool2dSpec rounded_down{spec_.kernel, spec_.stride, spec_.padding};
      direct_ = oh != Pool2dOutputSize(rounded_down, x[2]) ||
                ow != Pool2dOutputSize(rounded_down, x[3]);
    }
    if (direct_) {
      windows_ = {x[0], x[1], x[2], x[3], oh, ow, spec_.kernel, spec_.stride, spec_.padding};
      argmax_.Resize(Shape{x[0], x[1], oh, ow});
      return;
    }
    const cudnnPoolingMode_t mode = kind_ == PoolKind::kMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                        : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    COHORT_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_.get(), mode, CUDNN_NOT_PROPAGATE_NAN, kh,
                                                   kw, pad, pad, stride_h, stride_w));
    x_.Set(*s_, x);
    y_.Set(*s_, x[0], x[1], oh, ow);
  }

  std::shared_ptr<Shared> s_;
  PoolDesc pool_;
  TensorDesc x_, y_;
  LastShape last_;
  bool direct_ = false;  // ceil_mode's extra windows: MaxPoolForward/Backward, not cuDNN
  PoolWindows windows_{};
  Tensor argmax_;  // (N, C, OH, OW) I32 of the last forward, for the direct backward
};

// ----------------------------------------------------------------------------------------
// Batch norm: cuDNN's spatial batch norm. Training goes through the Ex calls: only they reach
// the channels-last kernels (with the persistent mode); the plain calls run a
// per-channel kernel that took 93% of a ResNet-50 step on an H200. cuDNN wants scale, shift and
// statistics in fp32: 16-bit parameters are cast to and from fp32 copies, and the running
// statistics are fp32 tensors. With relu, the ReLU after it is fused (the Ex calls'
// CUDNN_BATCHNORM_OPS_BN_ACTIVATION, which cuDNN runs in its persistent channels-last mode:
// 16-bit activations, channels last); its backward reads y.

class BatchNormOp final : public BatchNormFrame {
 public:
  BatchNormOp(std::shared_ptr<Shared> s, BatchNormSpec spec, bool relu)
      : BatchNormFrame(spec), s_(std::move(s)), relu_(relu) {
    Allocator* a = s_->ctx->allocator();
    for (Tensor* t : {&running_mean_, &running_var_, &gamma_, &beta_, &dgamma_, &dbeta_,
                      &saved_mean_, &saved_inv_std_}) {
      *t = Tensor(Shape{spec.channels}, DType::kF32, a);
    }
    dx_scratch_ = Tensor(Shape{0}, s_->dtype, a);
    reserve_ = Tensor(Shape{0}, DType::kF32, a);  // bytes, counted in floats
    Tensor ones(Shape{spec.channels}, DType::kF32);
    for (float& v : ones.span<float>()) v = 1.0f;
    running_var_.CopyFrom(ones);
    running_mean_.SetZero();
  }

  std::vector<OpState> State() override {
    return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
  }

  // x, with the saved statistics (and, with relu, y).
  BackwardReads ReadsInBackward() const override { return {true, relu_}; }

  void Forward(Mode mode, Ins in, Outs out) override {
    Prepare(in[0]->shape());
    const void* gamma = AsF32(*in[1], &gamma_);
    const void* beta = AsF32(*in[2], &beta_);
    cudnnHandle_t h = s_->ctx->cudnn();
    if (mode == Mode::kTrain) {
      COHORT_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
          h, train_mode_, Ops(), &kOne, &kZero, x_.get(), Ptr(in[0]), nullptr, nullptr, x_.get(),
          Ptr(out[0]), bn_.get(), gamma, beta, spec_.momentum, Ptr(&running_mean_),
          Ptr(&running_var_), spec_.eps, Ptr(&saved_mean_), Ptr(&saved_inv_std_), Relu(),
          s_->ctx->Workspace(forward_workspace_), forward_workspace_, ReserveSpace(),
          reserve_.nbytes()));
      return;
    }
    COHORT_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
        h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), Ptr(in[0]), x_.get(), Ptr(out[0]),
        bn_.get(), gamma, beta, Ptr(&running_mean_), Ptr(&running_var_), spec_.eps));
    if (relu_) {
      COHORT_CUDA_CHECK(ReluForward(Ptr(out[0]), Ptr(out[0]), s_->elem(), out[0]->numel(),
                                    s_->stream()));
    }
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    Prepare(in[0]->shape());
    const bool f32 = s_->dtype == DType::kF32;
    // In fp32 the parameter gradients land in place; otherwise in fp32 copies, cast after.
    void* dgamma = f32 && grad_in[1] != nullptr ? Ptr(grad_in[1]) : Ptr(&dgamma_);
    void* dbeta = f32 && grad_in[2] != nullptr ? Ptr(grad_in[2]) : Ptr(&dbeta_);
    // cuDNN always writes the input gradient; a scratch buffer takes it when nobody wants it.
    void* dx = grad_in[0] != nullptr ? Ptr(grad_in[0]) : (dx_scratch_.Resize(in[0]->shape()),
                                                           Ptr(&dx_scratch_));
    const void* gamma = f32 ? Ptr(in[1]) : Ptr(&gamma_);  // the Forward's fp32 copies
    const void* beta = relu_ ? (f32 ? Ptr(in[2]) : Ptr(&beta_)) : nullptr;  // for the ReLU
    COHORT_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
        s_->ctx->cudnn(), train_mode_, Ops(), &kOne, &kZero, &kOne, &kZero, x_.get(), Ptr(in[0]),
        relu_ ? x_.get() : nullptr, relu_ ? Ptr(out[0]) : nullptr, x_.get(), Ptr(grad_out[0]),
        nullptr, nullptr, x_.get(), dx, bn_.get(), gamma, beta, dgamma, dbeta, spec_.eps,
        Ptr(&saved_mean_), Ptr(&saved_inv_std_), Relu(), s_->ctx->Workspace(backward_workspace_),
        backward_workspace_, ReserveSpace(), reserve_.nbytes()));
    if (f32) return;
    for (int k : {1, 2}) {
      if (grad_in[k] == nullptr) continue;
      COHORT_CUDA_CHECK(Cast(k == 1 ? dgamma : dbeta, Elem::kF32, Ptr(grad_in[k]), s_->elem(),
                             spec_.channels, s_->stream()));
    }
  }

 private:
  void Prepare(const Shape& x) {
    if (!last_.Changed(x)) return;
    x_.Set(*s_, x);
    // Channels-last fp32 too: the plain mode runs cuDNN's per-channel kernels there, 80% of a
    // ResNet-56 fp32 step on an H200.
    train_mode_ = s_->nhwc() ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
    COHORT_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bn_.get(), x_.get(), CUDNN_BATCHNORM_SPATIAL));
    cudnnHandle_t h = s_->ctx->cudnn();
    COHORT_CUDNN_CHECK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        h, train_mode_, Ops(), x_.get(), nullptr, x_.get(), bn_.get(), Relu(),
        &forward_workspace_));
    COHORT_CUDNN_CHECK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
        h, train_mode_, Ops(), x_.get(), relu_ ? x_.get() : nullptr, x_.get(), nullptr,
        x_.get(), bn_.get(), Relu(), &backward_workspace_));
    size_t reserve = 0;
    COHORT_CUDNN_CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
        h, train_mode_, Ops(), Relu(), x_.get(), &reserve));
    reserve_.Resize(Shape{static_cast<int64_t>((reserve + 3) / 4)});
  }

  cudnnBatchNormOps_t Ops() const {
    return relu_ ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN;
  }
  cudnnActivationDescriptor_t Relu() const { return relu_ ? relu_desc_.get() : nullptr; }

  // What the training Forward leaves for Backward beyond the saved statistics (none: null).
  void* ReserveSpace() { return reserve_.numel() > 0 ? Ptr(&reserve_) : nullptr; }

  // p itself in fp32, else its fp32 copy in *copy.
  const void* AsF32(const Tensor& p, Tensor* copy) {
    if (p.dtype() == DType::kF32) return Ptr(&p);
    COHORT_CUDA_CHECK(Cast(Ptr(&p), s_->elem(), Ptr(copy), Elem::kF32, p.numel(), s_->stream()));
    return Ptr(copy);
  }

  std::shared_ptr<Shared> s_;
  const bool relu_;
  ReluDesc relu_desc_;
  TensorDesc x_, bn_;
  LastShape last_;
  cudnnBatchNormMode_t train_mode_ = CUDNN_BATCHNORM_SPATIAL;
  Tensor running_mean_, running_var_;
  Tensor gamma_, beta_, dgamma_, dbeta_;  // fp32 copies for 16-bit parameters
  Tensor saved_mean_, saved_inv_std_;     // from the training Forward, for Backward
  Tensor reserve_;                        // likewise, the Ex calls' reserve space
  size_t forward_workspace_ = 0, backward_workspace_ = 0;
  Tensor dx_scratch_;
};

// ----------------------------------------------------------------------------------------
// Element-wise ops.

class AddOp final : public AddFrame {
 public:
  explicit AddOp(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  BackwardReads ReadsInBackward() const override { return {false, false}; }
  void Forward(Mode, Ins in, Outs out) override {
    COHORT_CUDA_CHECK(cohort::cuda::Add(Ptr(in[0]), Ptr(in[1]), Ptr(out[0]), s_->elem(),
                                        in[0]->numel(), s_->stream()));
  }
  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    for (Tensor* g : grad_in) {
      if (g != nullptr) CopyOnStream(*s_, Ptr(g), Ptr(grad_out[0]), grad_out[0]->nbytes());
    }
  }

 private:
  std::shared_ptr<Shared> s_;
};

// Channel concatenation: PartsToChannels copies the inputs into their channels of y, and
// ChannelsToParts copies the gradient back out, up to kMaxChannelParts inputs per launch.
class ConcatOp final : public ConcatFrame {
 public:
  explicit ConcatOp(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  // Only the inputs' shapes, which say where each one's channels lie.
  BackwardReads ReadsInBackward() const override { return {false, false}; }
  void Forward(Mode, Ins in, Outs out) override {
    const Shape& y = out[0]->shape();
    ForEachGroup(in, [&](size_t i) { return const_cast<void*>(Ptr(in[i])); },
                 [&](const ChannelParts& parts, int64_t first) {
                   COHORT_CUDA_CHECK(PartsToChannels(parts, y[0], y[1], y[2] * y[3], first,
                                                     s_->nhwc(), Ptr(out[0]), s_->elem(),
                                                     s_->stream()));
                 });
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    const Shape& y = grad_out[0]->shape();
    ForEachGroup(in, [&](size_t i) { return grad_in[i] != nullptr ? Ptr(grad_in[i]) : nullptr; },
                 [&](const ChannelParts& parts, int64_t first) {
                   COHORT_CUDA_CHECK(ChannelsToParts(Ptr(grad_out[0]), y[0], y[1], y[2] * y[3],
                                                     first, s_->nhwc(), parts, s_->elem(),
                                                     s_->stream()));
                 });
  }

 private:
  // Calls launch(parts, first channel) for each run of up to kMaxChannelParts inputs, input i's
  // pointer being data(i).
  template <typename Data, typename Launch>
  static void ForEachGroup(Ins in, Data data, Launch launch) {
    int64_t first = 0;
    for (size_t begin = 0; begin < in.size(); begin += kMaxChannelParts) {
      ChannelParts parts;
      int64_t channels = 0;
      for (size_t i = begin; i < in.size() && parts.count < kMaxChannelParts; ++i) {
        parts.data[parts.count] = data(i);
        parts.channels[parts.count++] = in[i]->shape()[1];
        channels += in[i]->shape()[1];
      }
      launch(parts, first);
      first += channels;
    }
  }

  std::shared_ptr<Shared> s_;
};

class ReluOp final : public ReluFrame {
 public:
  explicit ReluOp(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  // y, which says where the ReLU passed.
  BackwardReads ReadsInBackward() const override { return {false, true}; }
  void Forward(Mode, Ins in, Outs out) override {
    COHORT_CUDA_CHECK(
        ReluForward(Ptr(in[0]), Ptr(out[0]), s_->elem(), in[0]->numel(), s_->stream()));
  }
  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    COHORT_CUDA_CHECK(ReluBackward(Ptr(out[0]), Ptr(grad_out[0]), Ptr(grad_in[0]), s_->elem(),
                                   in[0]->numel(), s_->stream()));
  }

 private:
  std::shared_ptr<Shared> s_;
};

// y = relu(a + b) in one kernel (a residual block's end). Both inputs' gradient is dy where
// y > 0, else 0: one tensor, which a layer hands to both.
class AddReluOp final : public Op {
 public:
  explicit AddReluOp(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  absl::string_view name() const override { return "add_relu"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    ASSIGN_OR_RETURN(Shape y, AddOutputShape(in));
    return std::vector<Shape>{y};
  }
  bool InputsShareOneGradient() const override { return true; }
  // y, which says where the ReLU passed.
  BackwardReads ReadsInBackward() const override { return {false, true}; }
  void Forward(Mode, Ins in, Outs out) override {
    COHORT_CUDA_CHECK(AddRelu(Ptr(in[0]), Ptr(in[1]), Ptr(out[0]), s_->elem(), in[0]->numel(),
                              s_->stream()));
  }
  // Every input's gradient asked for gets it (a caller that shares one asks for one).
  void Backward(Ins, Ins out, Ins grad_out, Outs grad_in) override {
    const Tensor* first = nullptr;
    for (Tensor* g : grad_in) {
      if (g == nullptr) continue;
      if (first != nullptr) {
        CopyOnStream(*s_, Ptr(g), Ptr(first), first->nbytes());
        continue;
      }
      COHORT_CUDA_CHECK(ReluBackward(Ptr(out[0]), Ptr(grad_out[0]), Ptr(g), s_->elem(),
                                     out[0]->numel(), s_->stream()));
      first = g;
    }
  }

 private:
  std::shared_ptr<Shared> s_;
};

// The keep-mask comes from the same host function as every backend's (DropoutMask), so all
// drop the same elements; it goes up through pinned memory on the compute stream.
class DropoutOp final : public DropoutFrame {
 public:
  DropoutOp(std::shared_ptr<Shared> s, DropoutSpec spec)
      : DropoutFrame(spec),
        s_(std::move(s)),
        host_mask_(Shape{0}, DType::kI32, PinnedAllocator()),
        mask_(Shape{0}, DType::kI32, s_->ctx->allocator()) {
    COHORT_CUDA_CHECK(cudaEventCreateWithFlags(&mask_copied_, cudaEventDisableTiming));
  }
  ~DropoutOp() override { cudaEventDestroy(mask_copied_); }
  // The mask only.
  BackwardReads ReadsInBackward() const override { return {false, false}; }
  void Forward(Mode mode, Ins in, Outs out) override {
    const int64_t n = in[0]->numel();
    if (mode == Mode::kEval) {
      CopyOnStream(*s_, Ptr(out[0]), Ptr(in[0]), in[0]->nbytes());
      return;
    }
    // n bytes of mask, held in I32 tensors of a quarter the elements.
    const Shape words{(n + 3) / 4};
    COHORT_CUDA_CHECK(cudaEventSynchronize(mask_copied_));  // the last copy is done with it
    host_mask_.Resize(words);
    mask_.Resize(words);
    uint8_t* host = static_cast<uint8_t*>(Ptr(&host_mask_));
    const Shape& x = in[0]->shape();
    if (s_->nhwc() && x.rank() == 4) {
      // The mask is drawn in (N, C, H, W) order; channels-last memory holds it transposed.
      nchw_mask_.resize(n);
      DropoutMask(spec_, calls_++, absl::MakeSpan(nchw_mask_));
      const int64_t c = x[1], hw = x[2] * x[3];
      for (int64_t b = 0; b < x[0]; ++b)
        for (int64_t k = 0; k < c; ++k)
          for (int64_t p = 0; p < hw; ++p) host[(b * hw + p) * c + k] = nchw_mask_[(b * c + k) * hw + p];
    } else {
      DropoutMask(spec_, calls_++, absl::MakeSpan(host, static_cast<size_t>(n)));
    }
    COHORT_CUDA_CHECK(cudaMemcpyAsync(Ptr(&mask_), host, n, cudaMemcpyHostToDevice, s_->stream()));
    COHORT_CUDA_CHECK(cudaEventRecord(mask_copied_, s_->stream()));
    COHORT_CUDA_CHECK(MaskScale(Ptr(in[0]), static_cast<const uint8_t*>(Ptr(&mask_)), Scale(),
                                Ptr(out[0]), s_->elem(), n, s_->stream()));
  }
  void Backward(Ins, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    COHORT_CUDA_CHECK(MaskScale(Ptr(grad_out[0]), static_cast<const uint8_t*>(Ptr(&mask_)),
                                Scale(), Ptr(grad_in[0]), s_->elem(), grad_out[0]->numel(),
                                s_->stream()));
  }

 private:
  float Scale() const { return 1.0f / (1.0f - spec_.p); }
  std::shared_ptr<Shared> s_;
  uint64_t calls_ = 0;
  std::vector<uint8_t> nchw_mask_;
  Tensor host_mask_, mask_;
  cudaEvent_t mask_copied_ = nullptr;
};

class SubsamplePadOp final : public SubsamplePadFrame {
 public:
  SubsamplePadOp(std::shared_ptr<Shared> s, SubsamplePadSpec spec)
      : SubsamplePadFrame(spec), s_(std::move(s)) {}
  BackwardReads ReadsInBackward() const override { return {false, false}; }
  void Forward(Mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    COHORT_CUDA_CHECK(SubsamplePadForward(Ptr(in[0]), x[0], x[1], x[2], x[3], spec_.stride,
                                          spec_.pad_channels, s_->nhwc(), Ptr(out[0]), s_->elem(),
                                          s_->stream()));
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    const Shape& x = in[0]->shape();
    COHORT_CUDA_CHECK(SubsamplePadBackward(Ptr(grad_out[0]), x[0], x[1], x[2], x[3],
                                           spec_.stride, spec_.pad_channels, s_->nhwc(),
                                           Ptr(grad_in[0]), s_->elem(), s_->stream()));
  }

 private:
  std::shared_ptr<Shared> s_;
};

// ----------------------------------------------------------------------------------------
// Linear: y = x·wᵀ + b with cublasGemmEx, fp32 accumulation (TF32 for --precision tf32).
// Row-major (N, I) is column-major (I, N), so every product is written transposed.

class LinearOp final : public LinearFrame {
 public:
  explicit LinearOp(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  // x for the weights' gradient.
  BackwardReads ReadsInBackward() const override { return {true, false}; }
  void Forward(Mode, Ins in, Outs out) override {
    const int n = Dim(in[0]->shape()[0]), i = Dim(in[0]->shape()[1]), o = Dim(in[1]->shape()[0]);
    // yᶜ (O, N) = wᶜᵀ (O, I) · xᶜ (I, N)
    Gemm(CUBLAS_OP_T, CUBLAS_OP_N, o, n, i, Ptr(in[1]), i, Ptr(in[0]), i, Ptr(out[0]), o);
    COHORT_CUDA_CHECK(AddRowBias(Ptr(out[0]), Ptr(in[2]), n, o, s_->elem(), s_->stream()));
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    const int n = Dim(in[0]->shape()[0]), i = Dim(in[0]->shape()[1]), o = Dim(in[1]->shape()[0]);
    const void* dy = Ptr(grad_out[0]);
    if (grad_in[0] != nullptr) {  // dxᶜ (I, N) = wᶜ (I, O) · dyᶜ (O, N)
      Gemm(CUBLAS_OP_N, CUBLAS_OP_N, i, n, o, Ptr(in[1]), i, dy, o, Ptr(grad_in[0]), i);
    }
    if (grad_in[1] != nullptr) {  // dwᶜ (I, O) = xᶜ (I, N) · dyᶜᵀ (N, O)
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, i, o, n, Ptr(in[0]), i, dy, o, Ptr(grad_in[1]), i);
    }
    if (grad_in[2] != nullptr) {
      COHORT_CUDA_CHECK(ColumnSums(dy, n, o, Ptr(grad_in[2]), s_->elem(),
                                   s_->ctx->Workspace(ColumnSumsWorkspaceBytes(n, o)),
                                   s_->stream()));
    }
  }

 private:
  static int Dim(int64_t d) {
    COHORT_CHECK(d <= INT32_MAX, "linear: dimension %ld exceeds cuBLAS's int sizes", d);
    return static_cast<int>(d);
  }
  void Gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a,
            int lda, const void* b, int ldb, void* c, int ldc) {
    const cublasComputeType_t compute = s_->options.precision == Precision::kTf32
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    COHORT_CUBLAS_CHECK(cublasGemmEx(s_->ctx->cublas(), ta, tb, m, n, k, &kOne, a,
                                     s_->blas_type(), lda, b, s_->blas_type(), ldb, &kZero, c,
                                     s_->blas_type(), ldc, compute, CUBLAS_GEMM_DEFAULT));
  }
  std::shared_ptr<Shared> s_;
};

// Flatten reads (N, C, H, W) in C·H·W order, as the export and PyTorch do: channels-last
// activations are transposed back to channels-first.
class FlattenOp final : public Op {
 public:
  FlattenOp(std::shared_ptr<Shared> s, std::unique_ptr<Op> shapes)
      : s_(std::move(s)), shapes_(std::move(shapes)) {}
  BackwardReads ReadsInBackward() const override { return {false, false}; }
  absl::string_view name() const override { return "flatten"; }
  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    return shapes_->OutputShapes(in);
  }
  void Forward(Mode, Ins in, Outs out) override {
    const Shape& x = in[0]->shape();
    if (s_->nhwc() && x.rank() == 4) {
      COHORT_CUDA_CHECK(NscToNcs(Ptr(in[0]), x[0], x[1], x[2] * x[3], Ptr(out[0]), s_->elem(),
                                 s_->stream()));
    } else {
      CopyOnStream(*s_, Ptr(out[0]), Ptr(in[0]), in[0]->nbytes());
    }
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    const Shape& x = in[0]->shape();
    if (s_->nhwc() && x.rank() == 4) {
      COHORT_CUDA_CHECK(NcsToNsc(Ptr(grad_out[0]), x[0], x[1], x[2] * x[3], Ptr(grad_in[0]),
                                 s_->elem(), s_->stream()));
    } else {
      CopyOnStream(*s_, Ptr(grad_in[0]), Ptr(grad_out[0]), grad_out[0]->nbytes());
    }
  }

 private:
  std::shared_ptr<Shared> s_;
  std::unique_ptr<Op> shapes_;  // the shared flatten op, for its shape rule
};

// The loss is an fp32 scalar on the device (as is the gradient seed), whatever the
// activations' dtype; the softmax of the Forward is kept in fp32 for Backward.
class SoftmaxCrossEntropyOp final : public SoftmaxCrossEntropyFrame {
 public:
  explicit SoftmaxCrossEntropyOp(std::shared_ptr<Shared> s)
      : s_(std::move(s)),
        probs_(Shape{0}, DType::kF32, s_->ctx->allocator()),
        row_loss_(Shape{0}, DType::kF32, s_->ctx->allocator()) {}
  void Forward(Mode, Ins in, Outs out) override {
    COHORT_CHECK(out[0]->dtype() == DType::kF32 && in[1]->dtype() == DType::kI32,
                 "softmax_cross_entropy: loss must be F32 and labels I32 on the GPU");
    const Shape& logits = in[0]->shape();
    probs_.Resize(logits);
    row_loss_.Resize(Shape{logits[0]});
    COHORT_CUDA_CHECK(SoftmaxCrossEntropyForward(
        Ptr(in[0]), static_cast<const int32_t*>(Ptr(in[1])), logits[0], logits[1], s_->elem(),
        static_cast<float*>(Ptr(&probs_)), static_cast<float*>(Ptr(&row_loss_)),
        static_cast<float*>(Ptr(out[0])), s_->stream()));
  }
  void Backward(Ins in, Ins, Ins grad_out, Outs grad_in) override {
    if (grad_in[0] == nullptr) return;
    const Shape& logits = in[0]->shape();
    COHORT_CUDA_CHECK(SoftmaxCrossEntropyBackward(
        static_cast<const float*>(Ptr(&probs_)), static_cast<const int32_t*>(Ptr(in[1])),
        logits[0], logits[1], static_cast<const float*>(Ptr(grad_out[0])), Ptr(grad_in[0]),
        s_->elem(), s_->stream()));
  }

 private:
  std::shared_ptr<Shared> s_;
  Tensor probs_, row_loss_;
};

}  // namespace

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
  return std::make_unique<PoolOp>(shared_, PoolKind::kMax, spec);
}
std::unique_ptr<Op> CudaBackend::AvgPool2d(const Pool2dSpec& spec) {
  return std::make_unique<PoolOp>(shared_, PoolKind::kAvg, spec);
}
std::unique_ptr<Op> CudaBackend::GlobalAvgPool() {
  return std::make_unique<PoolOp>(shared_, PoolKind::kGlobalAvg, Pool2dSpec{});
}
std::unique_ptr<Op> CudaBackend::BatchNorm(const BatchNormSpec& spec) {
  return std::make_unique<BatchNormOp>(shared_, spec, /*relu=*/false);
}
std::unique_ptr<Op> CudaBackend::Add() { return std::make_unique<AddOp>(shared_); }
std::unique_ptr<Op> CudaBackend::Concat() { return std::make_unique<ConcatOp>(shared_); }
std::unique_ptr<Op> CudaBackend::Dropout(const DropoutSpec& spec) {
  return std::make_unique<DropoutOp>(shared_, spec);
}
std::unique_ptr<Op> CudaBackend::SubsamplePad(const SubsamplePadSpec& spec) {
  return std::make_unique<SubsamplePadOp>(shared_, spec);
}
std::unique_ptr<Op> CudaBackend::Relu() { return std::make_unique<ReluOp>(shared_); }
std::unique_ptr<Op> CudaBackend::FuseRelu(const Op& op) {
  if (op.name() == "add") return std::make_unique<AddReluOp>(shared_);
  // cuDNN fuses the ReLU in its persistent mode only (16-bit activations, channels last).
  const Shared& s = *shared_;
  if (op.name() == "batch_norm" && s.options.fuse_batch_norm_relu && s.nhwc() &&
      s.dtype != DType::kF32) {
    return std::make_unique<BatchNormOp>(
        shared_, static_cast<const BatchNormFrame&>(op).spec(), /*relu=*/true);
  }
  return nullptr;
}
std::unique_ptr<Op> CudaBackend::Linear() { return std::make_unique<LinearOp>(shared_); }
std::unique_ptr<Op> CudaBackend::Flatten() {
  return std::make_unique<FlattenOp>(shared_, Backend::Flatten());
}
std::unique_ptr<Op> CudaBackend::SoftmaxCrossEntropy() {
  return std::make_unique<SoftmaxCrossEntropyOp>(shared_);
}

}  // namespace cohort::cuda
