#ifndef COHORT_TRAINER_OPS_CUDA_KERNELS_H_
#define COHORT_TRAINER_OPS_CUDA_KERNELS_H_

// The CUDA kernels of the GPU backend, for the work cuDNN and cuBLAS have no call for (or a
// slower one): casts, layout transposes, bias rows, element-wise sums and ReLU, the loss,
// dropout's mask, the ResNet shortcut, channel concatenation, ceil-mode max pooling and the
// mixed-precision gradient checks. Every function takes device pointers, enqueues its work on
// `stream` and returns the launch's error (cudaGetLastError); n == 0 launches nothing.
// Arithmetic is in fp32 whatever the storage type.

#include <cuda_runtime.h>

#include <cstdint>

namespace cohort::cuda {

// Storage types of activations, weights and gradients.
enum class Elem { kF32, kBF16, kF16 };

// dst[i] = src[i] converted (round to nearest even); the types may be equal (a copy).
cudaError_t Cast(const void* src, Elem src_type, void* dst, Elem dst_type, int64_t n,
                 cudaStream_t stream);

// y = a + b, n elements of one type.
cudaError_t Add(const void* a, const void* b, void* y, Elem type, int64_t n,
                cudaStream_t stream);
// y = relu(a + b) in one pass: the bits of Add then ReluForward.
cudaError_t AddRelu(const void* a, const void* b, void* y, Elem type, int64_t n,
                    cudaStream_t stream);

// ReLU: y = x > 0 ? x : 0; backward from its output: dx = y > 0 ? dy : 0.
cudaError_t ReluForward(const void* x, void* y, Elem type, int64_t n, cudaStream_t stream);
cudaError_t ReluBackward(const void* y, const void* dy, void* dx, Elem type, int64_t n,
                         cudaStream_t stream);

// y[i] = x[i] * mask[i] * scale (dropout, forward and backward alike). mask: n bytes, 0 or 1.
cudaError_t MaskScale(const void* x, const uint8_t* mask, float scale, void* y, Elem type,
                      int64_t n, cudaStream_t stream);

// Channels-first to channels-last and back: x (N, C, S) → y (N, S, C), and the inverse.
// S is H·W for activations; for a conv weight (O, I, KH, KW) → (O, KH, KW, I), N = O, C = I,
// S = KH·KW.
cudaError_t NcsToNsc(const void* x, int64_t n, int64_t c, int64_t s, void* y, Elem type,
                     cudaStream_t stream);
cudaError_t NscToNcs(const void* x, int64_t n, int64_t c, int64_t s, void* y, Elem type,
                     cudaStream_t stream);

// y (rows, cols) += b (cols), broadcast over rows.
cudaError_t AddRowBias(void* y, const void* b, int64_t rows, int64_t cols, Elem type,
                       cudaStream_t stream);
// db (cols) = sum over rows of dy (rows, cols), accumulated in fp32 in a fixed order.
// workspace: ColumnSumsWorkspaceBytes(rows, cols) of device scratch (none for few rows).
size_t ColumnSumsWorkspaceBytes(int64_t rows, int64_t cols);
cudaError_t ColumnSums(const void* dy, int64_t rows, int64_t cols, void* db, Elem type,
                       void* workspace, cudaStream_t stream);

// The ResNet "option A" shortcut (SubsamplePadSpec) on x (N, C, H, W) → y (N, C + 2·pad,
// ceil(H/stride), ceil(W/stride)); x, y, dy and dx are all stored channels-first (NCHW) or all
// channels-last (NHWC: element (n, c, h, w) at ((n·H + h)·W + w)·C + c) as nhwc says.
//   forward:  y[:, c + pad, i, j] = x[:, c, i·stride, j·stride], zero in the padded channels;
//   backward: dx[:, c, h, w] = dy[:, c + pad, h/stride, w/stride] where stride divides h and w,
//             zero elsewhere.
cudaError_t SubsamplePadForward(const void* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                int stride, int64_t pad, bool nhwc, void* y, Elem type,
                                cudaStream_t stream);
cudaError_t SubsamplePadBackward(const void* dy, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int stride, int64_t pad, bool nhwc, void* dx, Elem type,
                                 cudaStream_t stream);

// Channel concatenation (the Concat op) of up to kMaxChannelParts parts into channels
// [first, first + ΣC_i) of y (N, C, H, W), part i (N, C_i, H, W) after the parts before it; y
// and every part in one layout, as nhwc says (SubsamplePad's). HW is H·W.
//   PartsToChannels: y's channels ← the parts (a forward);
//   ChannelsToParts: the parts ← y's channels (a backward), skipping null parts.
constexpr int kMaxChannelParts = 8;
struct ChannelParts {
  void* data[kMaxChannelParts];  // read or written, as the call says
  int64_t channels[kMaxChannelParts];
  int count = 0;
};
cudaError_t PartsToChannels(const ChannelParts& parts, int64_t n, int64_t c, int64_t hw,
                            int64_t first, bool nhwc, void* y, Elem type, cudaStream_t stream);
cudaError_t ChannelsToParts(const void* y, int64_t n, int64_t c, int64_t hw, int64_t first,
                            bool nhwc, const ChannelParts& parts, Elem type, cudaStream_t stream);

// Max pooling x (N, C, H, W) → y (N, C, OH, OW) over kernel×kernel windows starting at
// (oh·stride − pad, ow·stride − pad), cut at the image's edges (padding never wins), for any OH
// and OW whose windows all start inside the image or its left padding: ceil_mode's last windows
// reach past the right padding, which cuDNN's symmetric padding cannot express. Ties go to the
// first maximum in row-major window order (the reference's). x, y, dy and dx all in one layout.
//   forward:  y, and argmax (N, C, OH, OW) in y's layout: the winner's h·W + w, for backward;
//   backward: dx at each input position = the sum of dy over the windows it won (a gather: no
//             atomics, the same bits every run).
struct PoolWindows {
  int64_t n, c, h, w, oh, ow;
  int kernel, stride, pad;
};
cudaError_t MaxPoolForward(const void* x, const PoolWindows& p, bool nhwc, void* y,
                           int32_t* argmax, Elem type, cudaStream_t stream);
cudaError_t MaxPoolBackward(const void* dy, const int32_t* argmax, const PoolWindows& p, bool nhwc,
                            void* dx, Elem type, cudaStream_t stream);

// Mean softmax cross-entropy of logits (n, k) against labels (n) in [0, k).
//   forward:  probs (n, k) fp32 = softmax(logits) (kept for backward); *loss (one fp32) =
//             mean over rows of −log probs[label]. row_loss: n fp32 of scratch.
//   backward: dlogits = (probs − onehot(labels)) · (*dloss) / n, dloss one fp32 on the device.
// A label outside [0, k) makes the loss NaN (backward: that row has no one-hot term).
cudaError_t SoftmaxCrossEntropyForward(const void* logits, const int32_t* labels, int64_t n,
                                       int64_t k, Elem type, float* probs, float* row_loss,
                                       float* loss, cudaStream_t stream);
cudaError_t SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, int64_t n,
                                        int64_t k, const float* dloss, void* dlogits,
                                        Elem type, cudaStream_t stream);

// Mixed precision: out[i] = g[i] · inv_scale in fp32, and *found_nonfinite = 1 when any g[i]
// is Inf or NaN (never cleared here: zero it once before a step's calls).
cudaError_t UnscaleToF32(const void* g, Elem type, int64_t n, float inv_scale, float* out,
                         int* found_nonfinite, cudaStream_t stream);

// Several replicas' gradients of one parameter, weighted: sum (n fp32) =
//   g[0][i]·w[0] + w[1]·g[1][i] + ... + w[count−1]·g[count−1][i]
// in that order, each product and sum rounded on its own (no fused multiply-add), as the host's
// reduction (MakeHostReplicaExchange) rounds, so both give the same bits. Every g[r] is a
// device pointer of `type` readable from the stream's GPU.
constexpr int kMaxReplicaTerms = 16;
struct ReplicaTerms {
  const void* g[kMaxReplicaTerms];
  float w[kMaxReplicaTerms];
  int count = 0;
};
cudaError_t WeightedSumToF32(const ReplicaTerms& terms, Elem type, int64_t n, float* sum,
                             cudaStream_t stream);

}  // namespace cohort::cuda

#endif  // COHORT_TRAINER_OPS_CUDA_KERNELS_H_
