// The CUDA backend's element-wise ops: add, concatenation, ReLU, add + ReLU, dropout, the ResNet shortcut.

#include <memory>
#include <utility>
#include <vector>

#include "trainer/base/status_macros.h"
#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {
namespace {

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

}  // namespace

std::unique_ptr<Op> MakeAddOp(std::shared_ptr<Shared> s) {
  return std::make_unique<AddOp>(std::move(s));
}
std::unique_ptr<Op> MakeAddReluOp(std::shared_ptr<Shared> s) {
  return std::make_unique<AddReluOp>(std::move(s));
}
std::unique_ptr<Op> MakeConcatOp(std::shared_ptr<Shared> s) {
  return std::make_unique<ConcatOp>(std::move(s));
}
std::unique_ptr<Op> MakeReluOp(std::shared_ptr<Shared> s) {
  return std::make_unique<ReluOp>(std::move(s));
}
std::unique_ptr<Op> MakeDropoutOp(std::shared_ptr<Shared> s, const DropoutSpec& spec) {
  return std::make_unique<DropoutOp>(std::move(s), spec);
}
std::unique_ptr<Op> MakeSubsamplePadOp(std::shared_ptr<Shared> s, const SubsamplePadSpec& spec) {
  return std::make_unique<SubsamplePadOp>(std::move(s), spec);
}
}  // namespace cohort::cuda
