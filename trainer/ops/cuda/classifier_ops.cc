// The CUDA backend's classifier: linear layers, flatten and softmax cross-entropy.

#include <memory>
#include <utility>
#include <vector>

#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {
namespace {

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

std::unique_ptr<Op> MakeLinearOp(std::shared_ptr<Shared> s) {
  return std::make_unique<LinearOp>(std::move(s));
}
std::unique_ptr<Op> MakeFlattenOp(std::shared_ptr<Shared> s, std::unique_ptr<Op> copy) {
  return std::make_unique<FlattenOp>(std::move(s), std::move(copy));
}
std::unique_ptr<Op> MakeSoftmaxCrossEntropyOp(std::shared_ptr<Shared> s) {
  return std::make_unique<SoftmaxCrossEntropyOp>(std::move(s));
}
}  // namespace cohort::cuda
