#include "trainer/ops/cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace cohort::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover whatever a capped grid does not.
constexpr int64_t kMaxBlocks = 65535;
// Transposes and column sums work on 32-wide tiles, one warp across.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

unsigned Blocks(int64_t work, int64_t per_block = kThreads) {
  return static_cast<unsigned>(std::min((work + per_block - 1) / per_block, kMaxBlocks));
}

__device__ __forceinline__ float ToF32(float x) { return x; }
__device__ __forceinline__ float ToF32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToF32(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T FromF32(float x);
template <>
__device__ __forceinline__ float FromF32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromF32<__half>(float x) {
  return __float2half_rn(x);
}

#define COHORT_GRID_STRIDE(i, n)                                            \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

// Calls f(T{}) for the storage type T of `type`; false for an unknown type.
template <typename F>
bool Visit(Elem type, F&& f) {
  switch (type) {
    case Elem::kF32:
      f(float{});
      return true;
    case Elem::kBF16:
      f(__nv_bfloat16{});
      return true;
    case Elem::kF16:
      f(__half{});
      return true;
  }
  return false;
}

// Launches launch(T{}) for the storage type T of `type` and returns the launch's error.
template <typename Launch>
cudaError_t Dispatch(Elem type, Launch&& launch) {
  return Visit(type, launch) ? cudaGetLastError() : cudaErrorInvalidValue;
}

template <typename S, typename D>
__global__ void CastKernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  COHORT_GRID_STRIDE(i, n) dst[i] = FromF32<D>(ToF32(src[i]));
}

// Element-wise kernels move 16 bytes per access where every pointer allows: a Lanes<T> holds
// that many elements, and PerLane applies an element function to each.
template <typename T>
constexpr int kLanes = 16 / sizeof(T);

template <typename T>
struct alignas(16) Lanes {
  static constexpr int kCount = kLanes<T>;
  T v[kCount];
};

template <typename F>
struct PerLane {
  F f;
  template <typename L, typename... Ls>
  __device__ __forceinline__ L operator()(const L& first, const Ls&... rest) const {
    L out;
#pragma unroll
    for (int k = 0; k < L::kCount; ++k) {
      out.v[k] = f(first.v[k], rest.v[k]...);
    }
    return out;
  }
};

// y[i] = f(in[i]...). y may alias an input (a gradient summed in place): each element is read
// before it is written by the same thread, so nothing here is __restrict__.
template <typename Y, typename F, typename... X>
__global__ void ElementwiseKernel(F f, int64_t n, Y* y, const X*... in) {
  COHORT_GRID_STRIDE(i, n) y[i] = f(in[i]...);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// y[i] = f(in[i]...) for i in [0, n) of one type T: whole Lanes where all pointers are 16-byte
// aligned, single elements for the rest.
template <typename T, typename F, typename... X>
void LaunchElementwise(cudaStream_t stream, F f, int64_t n, T* y, const X*... in) {
  // A Lanes<X> of another size would cover other elements than the Lanes<T> it pairs with.
  static_assert((std::is_same_v<X, T> && ...), "inputs must have the output's type");
  int64_t done = 0;
  if ((Aligned16(y) && ... && Aligned16(in))) {
    const int64_t vectors = n / kLanes<T>;
    if (vectors > 0) {
      ElementwiseKernel<<<Blocks(vectors), kThreads, 0, stream>>>(
          PerLane<F>{f}, vectors, reinterpret_cast<Lanes<T>*>(y),
          reinterpret_cast<const Lanes<X>*>(in)...);
    }
    done = vectors * kLanes<T>;
  }
  if (done < n) {
    ElementwiseKernel<<<Blocks(n - done), kThreads, 0, stream>>>(f, n - done, y + done,
                                                                 (in + done)...);
  }
}

template <typename T>
struct AddOf {
  __device__ __forceinline__ T operator()(T a, T b) const {
    return FromF32<T>(ToF32(a) + ToF32(b));
  }
};

// The sum rounded to T first, as Add gives it, so that the result is ReluOf's of Add's.
template <typename T>
struct AddReluOf {
  __device__ __forceinline__ T operator()(T a, T b) const {
    const T sum = FromF32<T>(ToF32(a) + ToF32(b));
    return ToF32(sum) > 0.0f ? sum : FromF32<T>(0.0f);
  }
};

// NaN becomes 0, as in the reference (std::max(0.0, x)).
template <typename T>
struct ReluOf {
  __device__ __forceinline__ T operator()(T x) const {
    return ToF32(x) > 0.0f ? x : FromF32<T>(0.0f);
  }
};

template <typename T>
struct ReluGradientOf {
  __device__ __forceinline__ T operator()(T y, T dy) const {
    return ToF32(y) > 0.0f ? dy : FromF32<T>(0.0f);
  }
};

template <typename T>
__global__ void MaskScaleKernel(const T* __restrict__ x, const uint8_t* __restrict__ mask,
                                float scale, T* __restrict__ y, int64_t n) {
  // A select, not a product: dropped elements are 0 even where x is Inf or NaN.
  COHORT_GRID_STRIDE(i, n) y[i] = FromF32<T>(mask[i] != 0 ? ToF32(x[i]) * scale : 0.0f);
}

// y[b] = x[b]ᵀ for `batch` row-major (rows, cols) matrices, through a shared tile so that both
// the reads and the writes are coalesced. Values pass through unconverted.
template <typename T>
__global__ void BatchTransposeKernel(const T* __restrict__ x, int64_t batch, int64_t rows,
                                     int64_t cols, T* __restrict__ y) {
  __shared__ T tile[kTile][kTile + 1];  // +1: the column-wise reads hit distinct banks
  const int64_t tile_rows = (rows + kTile - 1) / kTile;
  const int64_t tile_cols = (cols + kTile - 1) / kTile;
  const int64_t per_matrix = tile_rows * tile_cols;
  for (int64_t t = blockIdx.x; t < batch * per_matrix; t += gridDim.x) {
    const int64_t b = t / per_matrix;
    const int64_t r0 = (t % per_matrix) / tile_cols * kTile;
    const int64_t c0 = (t % per_matrix) % tile_cols * kTile;
    const T* xb = x + b * rows * cols;
    T* yb = y + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = xb[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) yb[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();  // the next tile overwrites this one
  }
}

cudaError_t BatchTranspose(const void* x, int64_t batch, int64_t rows, int64_t cols, void* y,
                           Elem type, cudaStream_t stream) {
  if (batch * rows * cols == 0) return cudaSuccess;
  const int64_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    BatchTransposeKernel<T><<<Blocks(tiles, 1), dim3(kTile, kTileRows), 0, stream>>>(
        static_cast<const T*>(x), batch, rows, cols, static_cast<T*>(y));
  });
}

template <typename T>
__global__ void AddRowBiasKernel(T* __restrict__ y, const T* __restrict__ b, int64_t rows,
                                 int64_t cols) {
  COHORT_GRID_STRIDE(i, rows * cols) y[i] = FromF32<T>(ToF32(y[i]) + ToF32(b[i % cols]));
}

// Column sums in two passes, so that every multiprocessor takes part however few the columns
// (a LeNet convolution's bias gradient: 6 columns of 200,704 rows) and the order of the
// additions is fixed. Pass one: a block per 32 columns and chunk of rows, each warp row summing
// a strided subset of the chunk (coalesced along the columns), then the block adds its
// kTileRows partial sums in a fixed order, into `partial` (chunk, column), or into db when
// there is one chunk. Pass two: one thread per column adds the chunks in order.
template <typename T>
__global__ void ColumnChunkSumsKernel(const T* __restrict__ dy, int64_t rows, int64_t cols,
                                      int64_t chunk_rows, float* __restrict__ partial,
                                      T* __restrict__ db) {
  __shared__ float sums[kTileRows][kTile];
  const int64_t first = blockIdx.y * chunk_rows;
  const int64_t end = min(rows, first + chunk_rows);
  for (int64_t c0 = blockIdx.x * int64_t{kTile}; c0 < cols; c0 += int64_t{gridDim.x} * kTile) {
    const int64_t col = c0 + threadIdx.x;
    float sum = 0.0f;
    if (col < cols) {
      for (int64_t r = first + threadIdx.y; r < end; r += kTileRows) {
        sum += ToF32(dy[r * cols + col]);
      }
    }
    sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      float total = 0.0f;
      for (int i = 0; i < kTileRows; ++i) total += sums[i][threadIdx.x];
      if (gridDim.y == 1) {
        db[col] = FromF32<T>(total);
      } else {
        partial[blockIdx.y * cols + col] = total;
      }
    }
    __syncthreads();  // the next columns overwrite `sums`
  }
}

template <typename T>
__global__ void AddChunksKernel(const float* __restrict__ partial, int64_t chunks, int64_t cols,
                                T* __restrict__ db) {
  COHORT_GRID_STRIDE(col, cols) {
    float total = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) total += partial[k * cols + col];
    db[col] = FromF32<T>(total);
  }
}

// Rows per chunk: enough for a block's loads to hide their latency, and at most kMaxChunks
// chunks so that pass two stays short.
constexpr int64_t kChunkRows = 256;
constexpr int64_t kMaxChunks = 1024;

int64_t ColumnChunkRows(int64_t rows) {
  return std::max(kChunkRows, (rows + kMaxChunks - 1) / kMaxChunks);
}

int64_t ColumnChunks(int64_t rows) {
  return std::max<int64_t>(1, (rows + ColumnChunkRows(rows) - 1) / ColumnChunkRows(rows));
}

// Element (b, ch, i, j) of a (N, C, H, W) tensor in either physical layout.
__device__ __forceinline__ int64_t Offset(bool nhwc, int64_t b, int64_t ch, int64_t i, int64_t j,
                                          int64_t c, int64_t h, int64_t w) {
  return nhwc ? ((b * h + i) * w + j) * c + ch : ((b * c + ch) * h + i) * w + j;
}

// The inverse of Offset: the coordinates of linear index `idx`.
__device__ __forceinline__ void Coords(bool nhwc, int64_t idx, int64_t c, int64_t h, int64_t w,
                                       int64_t& b, int64_t& ch, int64_t& i, int64_t& j) {
  if (nhwc) {
    ch = idx % c;
    idx /= c;
    j = idx % w;
    idx /= w;
    i = idx % h;
    b = idx / h;
  } else {
    j = idx % w;
    idx /= w;
    i = idx % h;
    idx /= h;
    ch = idx % c;
    b = idx / c;
  }
}

// One thread per output element, so every y element is written (padding included).
template <typename T>
__global__ void SubsamplePadForwardKernel(const T* __restrict__ x, int64_t n, int64_t c, int64_t h,
                                          int64_t w, int stride, int64_t pad, bool nhwc,
                                          T* __restrict__ y) {
  const int64_t yc = c + 2 * pad, yh = (h + stride - 1) / stride, yw = (w + stride - 1) / stride;
  COHORT_GRID_STRIDE(idx, n * yc * yh * yw) {
    int64_t b, ch, i, j;
    Coords(nhwc, idx, yc, yh, yw, b, ch, i, j);
    const int64_t xch = ch - pad;
    y[idx] = xch >= 0 && xch < c ? x[Offset(nhwc, b, xch, i * stride, j * stride, c, h, w)]
                                 : FromF32<T>(0.0f);
  }
}

// One thread per dx element: the positions the forward skipped get zeros.
template <typename T>
__global__ void SubsamplePadBackwardKernel(const T* __restrict__ dy, int64_t n, int64_t c,
                                           int64_t h, int64_t w, int stride, int64_t pad, bool nhwc,
                                           T* __restrict__ dx) {
  const int64_t yc = c + 2 * pad, yh = (h + stride - 1) / stride, yw = (w + stride - 1) / stride;
  COHORT_GRID_STRIDE(idx, n * c * h * w) {
    int64_t b, ch, i, j;
    Coords(nhwc, idx, c, h, w, b, ch, i, j);
    dx[idx] = i % stride == 0 && j % stride == 0
                  ? dy[Offset(nhwc, b, ch + pad, i / stride, j / stride, yc, yh, yw)]
                  : FromF32<T>(0.0f);
  }
}

// One thread per element of y's channels [first, first + ΣC_i), in y's order: coalesced on y,
// and contiguous runs of each part. kToY: part → y, else y → part (null parts skipped).
template <typename T, bool kToY>
__global__ void ChannelPartsKernel(ChannelParts parts, int64_t n, int64_t c, int64_t hw,
                                   int64_t first, int64_t group, bool nhwc, T* y) {
  COHORT_GRID_STRIDE(idx, n * group * hw) {
    int64_t b, ch, p;
    if (nhwc) {
      ch = idx % group;
      p = (idx / group) % hw;
      b = idx / (group * hw);
    } else {
      p = idx % hw;
      ch = (idx / hw) % group;
      b = idx / (hw * group);
    }
    const int64_t y_at = nhwc ? (b * hw + p) * c + first + ch : (b * c + first + ch) * hw + p;
    // The part holding channel ch, and ch's place in it.
    int i = 0;
    while (ch >= parts.channels[i]) ch -= parts.channels[i++];
    T* part = static_cast<T*>(parts.data[i]);
    const int64_t ci = parts.channels[i];
    const int64_t at = nhwc ? (b * hw + p) * ci + ch : (b * ci + ch) * hw + p;
    if (kToY) {
      y[y_at] = part[at];
    } else if (part != nullptr) {
      part[at] = y[y_at];
    }
  }
}

template <bool kToY>
cudaError_t LaunchChannelParts(const ChannelParts& parts, int64_t n, int64_t c, int64_t hw,
                               int64_t first, bool nhwc, void* y, Elem type, cudaStream_t stream) {
  if (parts.count < 1 || parts.count > kMaxChannelParts) return cudaErrorInvalidValue;
  int64_t group = 0;
  for (int i = 0; i < parts.count; ++i) group += parts.channels[i];
  if (first < 0 || first + group > c) return cudaErrorInvalidValue;
  if (n * group * hw == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    ChannelPartsKernel<T, kToY><<<Blocks(n * group * hw), kThreads, 0, stream>>>(
        parts, n, c, hw, first, group, nhwc, static_cast<T*>(y));
  });
}

// One thread per output: the window's first maximum, and where it was.
template <typename T>
__global__ void MaxPoolForwardKernel(const T* __restrict__ x, PoolWindows p, bool nhwc,
                                     T* __restrict__ y, int32_t* __restrict__ argmax) {
  COHORT_GRID_STRIDE(idx, p.n * p.c * p.oh * p.ow) {
    int64_t b, ch, i, j;
    Coords(nhwc, idx, p.c, p.oh, p.ow, b, ch, i, j);
    const int64_t h0 = i * p.stride - p.pad, w0 = j * p.stride - p.pad;
    int64_t best = -1;
    float best_value = 0.0f;
    T best_raw{};
    for (int64_t ih = max(h0, int64_t{0}); ih < min(h0 + p.kernel, p.h); ++ih) {
      for (int64_t iw = max(w0, int64_t{0}); iw < min(w0 + p.kernel, p.w); ++iw) {
        const T v = x[Offset(nhwc, b, ch, ih, iw, p.c, p.h, p.w)];
        if (best < 0 || ToF32(v) > best_value) {
          best = ih * p.w + iw;
          best_value = ToF32(v);
          best_raw = v;
        }
      }
    }
    y[idx] = best_raw;
    argmax[idx] = static_cast<int32_t>(best);
  }
}

// One thread per input position: the sum of dy over the windows it won, in window order.
template <typename T>
__global__ void MaxPoolBackwardKernel(const T* __restrict__ dy, const int32_t* __restrict__ argmax,
                                      PoolWindows p, bool nhwc, T* __restrict__ dx) {
  COHORT_GRID_STRIDE(idx, p.n * p.c * p.h * p.w) {
    int64_t b, ch, ih, iw;
    Coords(nhwc, idx, p.c, p.h, p.w, b, ch, ih, iw);
    // Windows oh with oh·stride − pad <= ih < oh·stride − pad + kernel (likewise ow).
    const int64_t oh_lo = max(int64_t{0}, (ih + p.pad - p.kernel + p.stride) / p.stride);
    const int64_t oh_hi = min(p.oh - 1, (ih + p.pad) / p.stride);
    const int64_t ow_lo = max(int64_t{0}, (iw + p.pad - p.kernel + p.stride) / p.stride);
    const int64_t ow_hi = min(p.ow - 1, (iw + p.pad) / p.stride);
    const int32_t me = static_cast<int32_t>(ih * p.w + iw);
    float sum = 0.0f;
    for (int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
      for (int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
        const int64_t at = Offset(nhwc, b, ch, oh, ow, p.c, p.oh, p.ow);
        if (argmax[at] == me) sum += ToF32(dy[at]);
      }
    }
    dx[idx] = FromF32<T>(sum);
  }
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. scratch: 32 floats of shared memory, free to reuse once this returns.
template <typename Op>
__device__ float BlockReduce(float v, Op op, float identity, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(~0u, v, offset));
  __syncthreads();  // earlier readers of scratch are done
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < blockDim.x / 32 ? scratch[threadIdx.x % 32] : identity;
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(~0u, v, offset));
  return v;
}

// One block per row: max, sum of exponentials, then probs and the row's loss in log-sum-exp
// form (finite even where probs[label] underflows to 0).
template <typename T>
__global__ void SoftmaxRowsKernel(const T* __restrict__ logits, const int32_t* __restrict__ labels,
                                  int64_t n, int64_t k, float* __restrict__ probs,
                                  float* __restrict__ row_loss) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {
    const T* x = logits + row * k;
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) max = fmaxf(max, ToF32(x[j]));
    max = BlockReduce(max, MaxOp(), -INFINITY, scratch);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) sum += expf(ToF32(x[j]) - max);
    sum = BlockReduce(sum, SumOp(), 0.0f, scratch);
    float* p = probs + row * k;
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) p[j] = expf(ToF32(x[j]) - max) / sum;
    if (threadIdx.x == 0) {
      const int32_t label = labels[row];
      row_loss[row] = label >= 0 && label < k ? logf(sum) - (ToF32(x[label]) - max) : NAN;
    }
  }
}

// A single block: fixed summation order, so the loss is deterministic.
__global__ void MeanKernel(const float* __restrict__ v, int64_t n, float* __restrict__ mean) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += v[i];
  sum = BlockReduce(sum, SumOp(), 0.0f, scratch);
  if (threadIdx.x == 0) *mean = sum / static_cast<float>(n);
}

template <typename T>
__global__ void SoftmaxBackwardKernel(const float* __restrict__ probs,
                                      const int32_t* __restrict__ labels, int64_t n, int64_t k,
                                      const float* __restrict__ dloss, T* __restrict__ dlogits) {
  const float scale = *dloss / static_cast<float>(n);
  COHORT_GRID_STRIDE(i, n * k) {
    const float onehot = i % k == labels[i / k] ? 1.0f : 0.0f;
    dlogits[i] = FromF32<T>((probs[i] - onehot) * scale);
  }
}

template <typename T>
__global__ void UnscaleKernel(const T* __restrict__ g, int64_t n, float inv_scale,
                              float* __restrict__ out, int* __restrict__ found_nonfinite) {
  bool nonfinite = false;
  COHORT_GRID_STRIDE(i, n) {
    const float v = ToF32(g[i]);
    nonfinite |= !isfinite(v);
    out[i] = v * inv_scale;
  }
  // Racing stores all write 1: no atomics needed.
  if (nonfinite) *found_nonfinite = 1;
}

}  // namespace

cudaError_t Cast(const void* src, Elem src_type, void* dst, Elem dst_type, int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (src_type == dst_type) {
    // Bit-exact, NaN payloads included.
    size_t size = 0;
    Visit(src_type, [&](auto tag) { size = sizeof(tag); });
    if (size == 0) return cudaErrorInvalidValue;
    return cudaMemcpyAsync(dst, src, n * size, cudaMemcpyDeviceToDevice, stream);
  }
  bool dst_known = false;
  const bool src_known = Visit(src_type, [&](auto src_tag) {
    using S = decltype(src_tag);
    dst_known = Visit(dst_type, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      if constexpr (!std::is_same_v<S, D>) {
        CastKernel<S, D><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(src),
                                                             static_cast<D*>(dst), n);
      }
    });
  });
  return src_known && dst_known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t Add(const void* a, const void* b, void* y, Elem type, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    LaunchElementwise(stream, AddOf<T>{}, n, static_cast<T*>(y), static_cast<const T*>(a),
                      static_cast<const T*>(b));
  });
}

cudaError_t AddRelu(const void* a, const void* b, void* y, Elem type, int64_t n,
                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    LaunchElementwise(stream, AddReluOf<T>{}, n, static_cast<T*>(y), static_cast<const T*>(a),
                      static_cast<const T*>(b));
  });
}

cudaError_t ReluForward(const void* x, void* y, Elem type, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    LaunchElementwise(stream, ReluOf<T>{}, n, static_cast<T*>(y), static_cast<const T*>(x));
  });
}

cudaError_t ReluBackward(const void* y, const void* dy, void* dx, Elem type, int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    LaunchElementwise(stream, ReluGradientOf<T>{}, n, static_cast<T*>(dx),
                      static_cast<const T*>(y), static_cast<const T*>(dy));
  });
}

cudaError_t MaskScale(const void* x, const uint8_t* mask, float scale, void* y, Elem type,
                      int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    MaskScaleKernel<T><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(x), mask, scale,
                                                           static_cast<T*>(y), n);
  });
}

cudaError_t NcsToNsc(const void* x, int64_t n, int64_t c, int64_t s, void* y, Elem type,
                     cudaStream_t stream) {
  return BatchTranspose(x, n, c, s, y, type, stream);
}

cudaError_t NscToNcs(const void* x, int64_t n, int64_t c, int64_t s, void* y, Elem type,
                     cudaStream_t stream) {
  return BatchTranspose(x, n, s, c, y, type, stream);
}

cudaError_t AddRowBias(void* y, const void* b, int64_t rows, int64_t cols, Elem type,
                       cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    AddRowBiasKernel<T><<<Blocks(rows * cols), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(b), rows, cols);
  });
}

size_t ColumnSumsWorkspaceBytes(int64_t rows, int64_t cols) {
  const int64_t chunks = ColumnChunks(rows);
  return chunks > 1 ? static_cast<size_t>(chunks * cols) * sizeof(float) : 0;
}

cudaError_t ColumnSums(const void* dy, int64_t rows, int64_t cols, void* db, Elem type,
                       void* workspace, cudaStream_t stream) {
  // rows == 0 still runs: db becomes zeros.
  if (cols == 0) return cudaSuccess;
  const int64_t chunks = ColumnChunks(rows);
  float* partial = static_cast<float*>(workspace);
  if (chunks > 1 && partial == nullptr) return cudaErrorInvalidValue;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(Blocks(cols, kTile), static_cast<unsigned>(chunks));
    ColumnChunkSumsKernel<T><<<grid, dim3(kTile, kTileRows), 0, stream>>>(
        static_cast<const T*>(dy), rows, cols, ColumnChunkRows(rows), partial,
        static_cast<T*>(db));
    if (chunks > 1) {
      AddChunksKernel<T><<<Blocks(cols), kThreads, 0, stream>>>(partial, chunks, cols,
                                                                static_cast<T*>(db));
    }
  });
}

cudaError_t SubsamplePadForward(const void* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                int stride, int64_t pad, bool nhwc, void* y, Elem type,
                                cudaStream_t stream) {
  if (stride < 1 || pad < 0) return cudaErrorInvalidValue;
  const int64_t size =
      n * (c + 2 * pad) * ((h + stride - 1) / stride) * ((w + stride - 1) / stride);
  if (size == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    SubsamplePadForwardKernel<T><<<Blocks(size), kThreads, 0, stream>>>(
        static_cast<const T*>(x), n, c, h, w, stride, pad, nhwc, static_cast<T*>(y));
  });
}

cudaError_t SubsamplePadBackward(const void* dy, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int stride, int64_t pad, bool nhwc, void* dx, Elem type,
                                 cudaStream_t stream) {
  if (stride < 1 || pad < 0) return cudaErrorInvalidValue;
  const int64_t size = n * c * h * w;
  if (size == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    SubsamplePadBackwardKernel<T><<<Blocks(size), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), n, c, h, w, stride, pad, nhwc, static_cast<T*>(dx));
  });
}

cudaError_t PartsToChannels(const ChannelParts& parts, int64_t n, int64_t c, int64_t hw,
                            int64_t first, bool nhwc, void* y, Elem type, cudaStream_t stream) {
  return LaunchChannelParts<true>(parts, n, c, hw, first, nhwc, y, type, stream);
}

cudaError_t ChannelsToParts(const void* y, int64_t n, int64_t c, int64_t hw, int64_t first,
                            bool nhwc, const ChannelParts& parts, Elem type, cudaStream_t stream) {
  // The kernel only reads y in this direction.
  return LaunchChannelParts<false>(parts, n, c, hw, first, nhwc, const_cast<void*>(y), type,
                                   stream);
}

cudaError_t MaxPoolForward(const void* x, const PoolWindows& p, bool nhwc, void* y,
                           int32_t* argmax, Elem type, cudaStream_t stream) {
  if (p.kernel < 1 || p.stride < 1 || p.pad < 0) return cudaErrorInvalidValue;
  const int64_t size = p.n * p.c * p.oh * p.ow;
  if (size == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    MaxPoolForwardKernel<T><<<Blocks(size), kThreads, 0, stream>>>(
        static_cast<const T*>(x), p, nhwc, static_cast<T*>(y), argmax);
  });
}

cudaError_t MaxPoolBackward(const void* dy, const int32_t* argmax, const PoolWindows& p, bool nhwc,
                            void* dx, Elem type, cudaStream_t stream) {
  if (p.kernel < 1 || p.stride < 1 || p.pad < 0) return cudaErrorInvalidValue;
  const int64_t size = p.n * p.c * p.h * p.w;
  if (size == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    MaxPoolBackwardKernel<T><<<Blocks(size), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), argmax, p, nhwc, static_cast<T*>(dx));
  });
}

cudaError_t SoftmaxCrossEntropyForward(const void* logits, const int32_t* labels, int64_t n,
                                       int64_t k, Elem type, float* probs, float* row_loss,
                                       float* loss, cudaStream_t stream) {
  // k == 0 still runs: no label is in range, so the loss is NaN.
  if (n == 0) return cudaSuccess;
  const cudaError_t err = Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    SoftmaxRowsKernel<T><<<Blocks(n, 1), kThreads, 0, stream>>>(static_cast<const T*>(logits),
                                                                labels, n, k, probs, row_loss);
  });
  if (err != cudaSuccess) return err;
  MeanKernel<<<1, 1024, 0, stream>>>(row_loss, n, loss);
  return cudaGetLastError();
}

cudaError_t SoftmaxCrossEntropyBackward(const float* probs, const int32_t* labels, int64_t n,
                                        int64_t k, const float* dloss, void* dlogits, Elem type,
                                        cudaStream_t stream) {
  if (n * k == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    SoftmaxBackwardKernel<T><<<Blocks(n * k), kThreads, 0, stream>>>(probs, labels, n, k, dloss,
                                                                     static_cast<T*>(dlogits));
  });
}

template <typename T>
__global__ void WeightedSumKernel(ReplicaTerms terms, int64_t n, float* __restrict__ sum) {
  COHORT_GRID_STRIDE(i, n) {
    float s = __fmul_rn(ToF32(static_cast<const T*>(terms.g[0])[i]), terms.w[0]);
    for (int r = 1; r < terms.count; ++r) {
      s = __fadd_rn(s, __fmul_rn(terms.w[r], ToF32(static_cast<const T*>(terms.g[r])[i])));
    }
    sum[i] = s;
  }
}

cudaError_t WeightedSumToF32(const ReplicaTerms& terms, Elem type, int64_t n, float* sum,
                             cudaStream_t stream) {
  if (terms.count < 1 || terms.count > kMaxReplicaTerms) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    WeightedSumKernel<T><<<Blocks(n), kThreads, 0, stream>>>(terms, n, sum);
  });
}

cudaError_t UnscaleToF32(const void* g, Elem type, int64_t n, float inv_scale, float* out,
                         int* found_nonfinite, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return Dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    UnscaleKernel<T><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(g), n, inv_scale,
                                                         out, found_nonfinite);
  });
}

}  // namespace cohort::cuda
