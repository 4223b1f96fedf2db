#include "trainer/ops/cuda/cuda_ops.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "trainer/base/status_macros.h"
#include "trainer/ops/cuda/cuda_backend_shared.h"
#include "trainer/ops/cuda/cuda_check.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/op_frames.h"

namespace cohort::cuda {
namespace {

// COHORT_CUDNN_FIND_LOG=1 prints every cudnnFind result to stderr: which algorithms ran, how
// fast, with what workspace, and which one each convolution uses (marked "chosen").
bool LogFind() {
  static const bool on = [] {
    const char* v = std::getenv("COHORT_CUDNN_FIND_LOG");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

// FFT and Winograd convolutions round far more than fp32's direct and GEMM ones (1e-3 of the
// largest input gradient of LeNet's first convolution on an H200): fp32 training does not use
// them; the 16-bit and TF32 precisions, which round as much anyway, may.
bool Approximate(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool Approximate(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool Approximate(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// Workspace offered to cudnnFind: algorithms needing more are not tried.
constexpr size_t kFindWorkspace = size_t{256} << 20;

// RAII wrappers of cuDNN descriptors (TensorDesc: cuda_backend_shared.h).
class FilterDesc {
 public:
  FilterDesc() { COHORT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d_)); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  // w: (O, I, KH, KW); channels-last filters are (O, KH, KW, I) in memory.
  void Set(const Shared& s, const Shape& w) {
    COHORT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        d_, s.cudnn_type(), s.nhwc() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
        static_cast<int>(w[0]), static_cast<int>(w[1]), static_cast<int>(w[2]),
        static_cast<int>(w[3])));
  }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_;
};

class ConvDesc {
 public:
  ConvDesc() { COHORT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d_)); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_;
};

// ----------------------------------------------------------------------------------------
// Conv2d: cuDNN's legacy convolution API; channels-last convolutions read their filters as
// (O, KH, KW, I), so the plain (O, I, KH, KW) weights are transposed on the way in and the
// weight gradient on the way out (except 1×1 filters, the same either way).

class ConvOp final : public Conv2dFrame {
 public:
  ConvOp(std::shared_ptr<Shared> s, Conv2dSpec spec)
      : Conv2dFrame(spec),
        s_(std::move(s)),
        w_staged_(Shape{0}, s_->dtype, s_->ctx->allocator()) {
    COHORT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_.get(), spec.padding, spec.padding,
                                                       spec.stride, spec.stride, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  }

  // x for the weights' gradient (the output only for its shape).
  BackwardReads ReadsInBackward() const override { return {true, false}; }

  void Forward(Mode, Ins in, Outs out) override {
    Plan& p = PlanFor(in[0]->shape(), in[1]->shape(), out[0]->shape());
    const void* w = StagedWeights(*in[1]);
    cudnnHandle_t h = s_->ctx->cudnn();
    if (!p.found_forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int n = 0;
      COHORT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
          h, p.x.get(), Ptr(in[0]), p.w.get(), w, conv_.get(), p.y.get(), Ptr(out[0]),
          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, s_->ctx->Workspace(kFindWorkspace),
          kFindWorkspace));
      const auto& best = Best(perf, n, "forward", in[0]->shape());
      p.forward = {best.algo, best.memory, best.mathType};
      p.found_forward = true;
    }
    SetMath(p.forward.math);
    COHORT_CUDNN_CHECK(cudnnConvolutionForward(
        h, &kOne, p.x.get(), Ptr(in[0]), p.w.get(), w, conv_.get(), p.forward.algo,
        s_->ctx->Workspace(p.forward.workspace), p.forward.workspace, &kZero, p.y.get(),
        Ptr(out[0])));
    if (!spec_.bias) return;
    const Shape& y = out[0]->shape();
    if (s_->nhwc()) {  // channels-last: a bias row per pixel
      COHORT_CUDA_CHECK(AddRowBias(Ptr(out[0]), Ptr(in[2]), y[0] * y[2] * y[3], y[1], s_->elem(),
                                   s_->stream()));
    } else {
      COHORT_CUDNN_CHECK(
          cudnnAddTensor(h, &kOne, p.bias.get(), Ptr(in[2]), &kOne, p.y.get(), Ptr(out[0])));
    }
  }

  void Backward(Ins in, Ins out, Ins grad_out, Outs grad_in) override {
    Plan& p = PlanFor(in[0]->shape(), in[1]->shape(), out[0]->shape());
    cudnnHandle_t h = s_->ctx->cudnn();
    const Tensor& dy = *grad_out[0];
    if (spec_.bias && grad_in[2] != nullptr) {
      // Channel sums of dy; channels-first dy is made channels-last first, in the workspace,
      // since cuDNN's own bias gradient refuses bf16 there.
      const Shape& y = dy.shape();
      const int64_t rows = y[0] * y[2] * y[3];
      // The workspace holds dy channels-last (where it is not already), then the sums' chunks.
      const size_t staged_bytes = s_->nhwc() ? 0 : (dy.nbytes() + 15) / 16 * 16;
      char* workspace = static_cast<char*>(
          s_->ctx->Workspace(staged_bytes + ColumnSumsWorkspaceBytes(rows, y[1])));
      const void* by_rows = Ptr(&dy);
      if (!s_->nhwc()) {
        COHORT_CUDA_CHECK(
            NcsToNsc(Ptr(&dy), y[0], y[1], y[2] * y[3], workspace, s_->elem(), s_->stream()));
        by_rows = workspace;
      }
      COHORT_CUDA_CHECK(ColumnSums(by_rows, rows, y[1], Ptr(grad_in[2]), s_->elem(),
                                   workspace + staged_bytes, s_->stream()));
    }
    if (grad_in[1] != nullptr) {
      Tensor* dw = grad_in[1];
      void* target = Ptr(dw);
      if (Permuted(dw->shape())) {
        s_->conv_dw_staging.Resize(dw->shape());
        target = Ptr(&s_->conv_dw_staging);
      }
      if (!p.found_filter) {
        SetMath(s_->math());  // search within the precision's bound, not the forward's choice
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int n = 0;
        COHORT_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            h, p.x.get(), Ptr(in[0]), p.y.get(), Ptr(&dy), conv_.get(), p.w.get(), target,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf,
            s_->ctx->Workspace(kFindWorkspace), kFindWorkspace));
        const auto& best = Best(perf, n, "weight gradient", in[0]->shape());
        p.filter = {best.algo, best.memory, best.mathType};
        p.found_filter = true;
      }
      SetMath(p.filter.math);
      COHORT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          h, &kOne, p.x.get(), Ptr(in[0]), p.y.get(), Ptr(&dy), conv_.get(), p.filter.algo,
          s_->ctx->Workspace(p.filter.workspace), p.filter.workspace, &kZero, p.w.get(),
          target));
      if (target != Ptr(dw)) {
        const Shape& w = dw->shape();
        COHORT_CUDA_CHECK(NscToNcs(target, w[0], w[1], w[2] * w[3], Ptr(dw), s_->elem(),
                                   s_->stream()));
      }
    }
    if (grad_in[0] != nullptr) {
      // The staged weights of the Forward this Backward follows are still in place.
      const void* w = Permuted(in[1]->shape()) ? Ptr(&w_staged_) : Ptr(in[1]);
      if (!p.found_data) {
        SetMath(s_->math());
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int n = 0;
        COHORT_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            h, p.w.get(), w, p.y.get(), Ptr(&dy), conv_.get(), p.x.get(), Ptr(grad_in[0]),
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, s_->ctx->Workspace(kFindWorkspace),
            kFindWorkspace));
        const auto& best = Best(perf, n, "input gradient", in[0]->shape());
        p.data = {best.algo, best.memory, best.mathType};
        p.found_data = true;
      }
      SetMath(p.data.math);
      COHORT_CUDNN_CHECK(cudnnConvolutionBackwardData(
          h, &kOne, p.w.get(), w, p.y.get(), Ptr(&dy), conv_.get(), p.data.algo,
          s_->ctx->Workspace(p.data.workspace), p.data.workspace, &kZero, p.x.get(),
          Ptr(grad_in[0])));
    }
  }

 private:
  template <typename Algo>
  struct Choice {
    Algo algo{};
    size_t workspace = 0;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  };
  // Descriptors and chosen algorithms for one input shape (training and evaluation batches
  // differ; each keeps its own).
  struct Plan {
    Shape x_shape;
    TensorDesc x, y, bias;
    FilterDesc w;
    bool found_forward = false, found_data = false, found_filter = false;
    Choice<cudnnConvolutionFwdAlgo_t> forward;
    Choice<cudnnConvolutionBwdDataAlgo_t> data;
    Choice<cudnnConvolutionBwdFilterAlgo_t> filter;
  };

  Plan& PlanFor(const Shape& x, const Shape& w, const Shape& y) {
    for (auto& p : plans_) {
      if (p->x_shape == x) return *p;
    }
    auto p = std::make_unique<Plan>();
    p->x_shape = x;
    p->x.Set(*s_, x);
    p->y.Set(*s_, y);
    p->w.Set(*s_, w);
    p->bias.Set(*s_, 1, w[0], 1, 1);
    plans_.push_back(std::move(p));
    return *plans_.back();
  }

  // The algorithm a convolution runs, among those cudnnFind ran that the precision allows (fp32
  // takes no FFT or Winograd): the fastest; with `deterministic`, the deterministic one with the
  // lowest number and math type, a choice that does not hang on timings, which vary by run.
  template <typename Perf>
  const Perf& Best(const Perf* perf, int n, const char* what, const Shape& x) {
    const bool fp32 = s_->options.precision == Precision::kFp32;
    const bool deterministic = s_->options.deterministic;
    const Perf* best = nullptr;
    for (int i = 0; i < n; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || (fp32 && Approximate(p.algo))) continue;
      if (!deterministic) {
        best = &p;  // cudnnFind lists the fastest first
        break;
      }
      if (p.determinism != CUDNN_DETERMINISTIC) continue;
      if (best == nullptr || std::make_pair(p.algo, p.mathType) <
                                 std::make_pair(best->algo, best->mathType)) {
        best = &p;
      }
    }
    if (LogFind()) {
      for (int i = 0; i < n; ++i) {
        std::fprintf(stderr,
                     "cudnnFind conv2d %s x=%s stride %d pad %d: algo %d %s %.3f ms %.1f MB "
                     "math %d%s%s\n",
                     what, x.ToString().c_str(), spec_.stride, spec_.padding,
                     static_cast<int>(perf[i].algo), cudnnGetErrorString(perf[i].status),
                     perf[i].time, perf[i].memory / 1e6, static_cast<int>(perf[i].mathType),
                     perf[i].determinism == CUDNN_DETERMINISTIC ? " deterministic" : "",
                     &perf[i] == best ? " (chosen)" : "");
      }
    }
    COHORT_CHECK(best != nullptr,
                 "conv2d %s, input %s: none of the %d algorithms cudnnFind ran is usable here "
                 "(fp32 excludes FFT and Winograd%s); COHORT_CUDNN_FIND_LOG=1 lists them. "
                 "Train in another precision%s, or report the shape",
                 what, x.ToString().c_str(), n,
                 deterministic ? ", deterministic excludes the others" : "",
                 deterministic ? " or without deterministic" : "");
    return *best;
  }

  void SetMath(cudnnMathType_t chosen) {
    // The precision's math type bounds what cudnnFind may pick; each direction then runs with
    // the one its algorithm was measured with.
    COHORT_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_.get(), chosen));
  }

  // Whether cuDNN's filters differ from the plain weights: channels-last, unless 1×1.
  bool Permuted(const Shape& w) const { return s_->nhwc() && w[2] * w[3] > 1; }

  const void* StagedWeights(const Tensor& w) {
    SetMath(s_->math());
    if (!Permuted(w.shape())) return Ptr(&w);
    w_staged_.Resize(w.shape());
    const Shape& ws = w.shape();
    COHORT_CUDA_CHECK(
        NcsToNsc(Ptr(&w), ws[0], ws[1], ws[2] * ws[3], Ptr(&w_staged_), s_->elem(), s_->stream()));
    return Ptr(&w_staged_);
  }

  std::shared_ptr<Shared> s_;
  ConvDesc conv_;
  std::vector<std::unique_ptr<Plan>> plans_;
  // A channels-last copy of the weights, from Forward to Backward.
  Tensor w_staged_;
};

}  // namespace

std::unique_ptr<Op> MakeConvOp(std::shared_ptr<Shared> s, const Conv2dSpec& spec) {
  return std::make_unique<ConvOp>(std::move(s), spec);
}

}  // namespace cohort::cuda
