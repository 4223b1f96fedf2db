// The CUDA backend's pooling.

#include <memory>
#include <utility>

#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {
namespace {

// RAII wrapper of a cuDNN pooling descriptor.
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

}  // namespace

std::unique_ptr<Op> MakePoolOp(std::shared_ptr<Shared> s, PoolKind kind, const Pool2dSpec& spec) {
  return std::make_unique<PoolOp>(std::move(s), kind, spec);
}
}  // namespace cohort::cuda
