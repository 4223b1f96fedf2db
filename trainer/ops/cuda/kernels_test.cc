#include "trainer/ops/cuda/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/base/random.h"
#include "trainer/ops/cuda/gpu_probe.h"
#include "trainer/tensor/tensor.h"

namespace cohort {
namespace {

using cuda::Elem;

constexpr Elem kTypes[] = {Elem::kF32, Elem::kBF16, Elem::kF16};

const char* Name(Elem t) { return t == Elem::kF32 ? "f32" : t == Elem::kBF16 ? "bf16" : "f16"; }
size_t Size(Elem t) { return t == Elem::kF32 ? 4 : 2; }
// Unit roundoff: half an ulp, relative.
double Eps(Elem t) { return t == Elem::kF32 ? 0x1p-24 : t == Elem::kBF16 ? 0x1p-8 : 0x1p-11; }
// Half the type's smallest subnormal: what rounding a tiny value to that type may lose.
double HalfSmallest(Elem t) {
  return t == Elem::kF32 ? 0x1p-150 : t == Elem::kBF16 ? 0x1p-134 : 0x1p-25;
}

std::vector<uint8_t> Encode(const std::vector<float>& v, Elem t) {
  std::vector<uint8_t> bytes(v.size() * Size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == Elem::kF32) {
      std::memcpy(&bytes[4 * i], &v[i], 4);
    } else {
      const uint16_t h = t == Elem::kBF16 ? FloatToBf16(v[i]) : FloatToF16(v[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> Decode(const std::vector<uint8_t>& bytes, Elem t) {
  std::vector<float> v(bytes.size() / Size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == Elem::kF32) {
      std::memcpy(&v[i], &bytes[4 * i], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      v[i] = t == Elem::kBF16 ? Bf16ToFloat(h) : F16ToFloat(h);
    }
  }
  return v;
}

// v rounded to what type t can hold.
std::vector<float> Round(const std::vector<float>& v, Elem t) { return Decode(Encode(v, t), t); }

std::vector<float> Random(int64_t n, uint64_t seed, Elem t, double lo = -1, double hi = 1) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.Uniform(lo, hi));
  return Round(v, t);
}

// |got − want| ≤ abs + rel·|want| everywhere: the defaults demand equality; NaN matches only NaN
// (so poisoned, unwritten elements fail).
template <typename T>
::testing::AssertionResult AllNear(const std::vector<float>& got, const std::vector<T>& want,
                                   double rel = 0, double abs = 0) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.size();
  }
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool ok =
        g == w || (std::isnan(g) && std::isnan(w)) || std::fabs(g - w) <= abs + rel * std::fabs(w);
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " differ; first [" << first
                                       << "]: " << got[first] << " vs " << want[first];
}

// Device memory, poisoned with 0xFF bytes (NaN in every storage type) so that elements a kernel
// fails to write show up.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr_, 0xFF, bytes), cudaSuccess);
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    if (bytes_ > 0) {
      EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  template <typename T = uint8_t>
  std::vector<T> Get() const {
    std::vector<T> host(bytes_ / sizeof(T));
    if (bytes_ > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }
  // The contents as values of type t.
  std::vector<float> Values(Elem t) const { return Decode(Get(), t); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

TEST(KernelsTest, EmptyLaunchesNothing) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  for (Elem t : kTypes) {
    EXPECT_EQ(cuda::Cast(nullptr, t, nullptr, Elem::kF32, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::Add(nullptr, nullptr, nullptr, t, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::AddRelu(nullptr, nullptr, nullptr, t, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::ReluForward(nullptr, nullptr, t, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::ReluBackward(nullptr, nullptr, nullptr, t, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::MaskScale(nullptr, nullptr, 2, nullptr, t, 0, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::NcsToNsc(nullptr, 2, 0, 3, nullptr, t, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::NscToNcs(nullptr, 0, 2, 3, nullptr, t, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::AddRowBias(nullptr, nullptr, 0, 4, t, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::ColumnSums(nullptr, 4, 0, nullptr, t, nullptr, nullptr), cudaSuccess);
    EXPECT_EQ(cuda::SubsamplePadForward(nullptr, 0, 3, 4, 4, 2, 1, true, nullptr, t, nullptr),
              cudaSuccess);
    EXPECT_EQ(cuda::SubsamplePadBackward(nullptr, 0, 3, 4, 4, 2, 1, false, nullptr, t, nullptr),
              cudaSuccess);
    EXPECT_EQ(cuda::SoftmaxCrossEntropyForward(nullptr, nullptr, 0, 10, t, nullptr, nullptr,
                                               nullptr, nullptr),
              cudaSuccess);
    EXPECT_EQ(
        cuda::SoftmaxCrossEntropyBackward(nullptr, nullptr, 0, 10, nullptr, nullptr, t, nullptr),
        cudaSuccess);
    EXPECT_EQ(cuda::UnscaleToF32(nullptr, t, 0, 1, nullptr, nullptr, nullptr), cudaSuccess);
    cuda::ReplicaTerms one;
    one.count = 1;
    EXPECT_EQ(cuda::WeightedSumToF32(one, t, 0, nullptr, nullptr), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(KernelsTest, CastRoundsToNearestEvenBetweenAllTypes) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  for (int64_t n : {int64_t{1}, int64_t{1000003}}) {
    // Magnitudes from 2^-30 (f16 subnormals and underflow) to 2^10.
    Rng rng(n);
    std::vector<float> x(n);
    for (auto& v : x) {
      v = std::ldexp(static_cast<float>(rng.Uniform(-1, 1)), static_cast<int>(rng.Below(40)) - 30);
    }
    // Exact ties (to even: down, up), then values that round to f16's Inf.
    const float ties[] = {1 + 0x1p-8f,      -(1 + 3 * 0x1p-8f), 1 + 0x1p-11f,
                          1 + 3 * 0x1p-11f, 65520.0f,           -70000.0f};
    if (n > 6) std::copy(std::begin(ties), std::end(ties), x.begin());
    for (Elem src : kTypes) {
      const std::vector<float> src_values = Round(x, src);
      DeviceBuffer in(Encode(src_values, src));
      for (Elem dst : kTypes) {
        SCOPED_TRACE(testing::Message() << n << " " << Name(src) << " -> " << Name(dst));
        DeviceBuffer out(n * Size(dst));
        ASSERT_EQ(cuda::Cast(in.get(), src, out.get(), dst, n, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(AllNear(out.Values(dst), Round(src_values, dst)));
      }
    }
  }
}

TEST(KernelsTest, CastRoundTripsThroughF32) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  const int64_t n = 4099;
  for (Elem t : {Elem::kBF16, Elem::kF16}) {
    SCOPED_TRACE(Name(t));
    const std::vector<uint8_t> bytes = Encode(Random(n, 5, t, -100, 100), t);
    DeviceBuffer x(bytes), wide(n * 4), back(bytes.size());
    ASSERT_EQ(cuda::Cast(x.get(), t, wide.get(), Elem::kF32, n, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::Cast(wide.get(), Elem::kF32, back.get(), t, n, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(back.Get() == bytes);
  }
}

TEST(KernelsTest, AddAndMaskScaleMatchHost) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  for (int64_t n : {int64_t{1}, int64_t{1000003}}) {
    Rng rng(n);
    std::vector<uint8_t> mask(n);
    for (auto& m : mask) m = static_cast<uint8_t>(rng.Below(2));
    const float scale = 1 / 0.7f;
    DeviceBuffer dmask(mask);
    for (Elem t : kTypes) {
      SCOPED_TRACE(testing::Message() << n << " " << Name(t));
      const std::vector<float> a = Random(n, 1, t), b = Random(n, 2, t);
      std::vector<float> sum(n), masked(n);
      for (int64_t i = 0; i < n; ++i) {
        sum[i] = a[i] + b[i];
        masked[i] = a[i] * static_cast<float>(mask[i]) * scale;
      }
      DeviceBuffer da(Encode(a, t)), db(Encode(b, t)), dsum(n * Size(t)), dmasked(n * Size(t));
      ASSERT_EQ(cuda::Add(da.get(), db.get(), dsum.get(), t, n, nullptr), cudaSuccess);
      ASSERT_EQ(cuda::MaskScale(da.get(), dmask.as<uint8_t>(), scale, dmasked.get(), t, n, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(AllNear(dsum.Values(t), Round(sum, t)));
      EXPECT_TRUE(AllNear(dmasked.Values(t), Round(masked, t)));
    }
  }
}

// The sum and ReLU move whole 16-byte vectors where every pointer is aligned to 16 bytes, and
// single elements for the rest: counts that are not whole vectors, and buffers starting one
// element in, give the same values.
TEST(KernelsTest, SumAndReluMatchHostAtAnyCountAndAlignment) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{23}, int64_t{1000003}}) {
    for (int64_t offset : {0, 1}) {
      for (Elem t : kTypes) {
        SCOPED_TRACE(testing::Message() << n << " at +" << offset << " " << Name(t));
        const std::vector<float> a = Random(n + offset, 3, t), b = Random(n + offset, 4, t);
        std::vector<float> sum(n), relu(n), relu_grad(n);
        for (int64_t i = 0; i < n; ++i) {
          const float x = a[i + offset], dy = b[i + offset];
          sum[i] = x + dy;
          relu[i] = x > 0 ? x : 0;
          relu_grad[i] = x > 0 ? dy : 0;  // a as ReLU's output, b as its output's gradient
        }
        std::vector<float> sum_relu = Round(sum, t);
        for (float& v : sum_relu) v = v > 0 ? v : 0;
        const size_t size = Size(t), skip = offset * size;
        DeviceBuffer da(Encode(a, t)), db(Encode(b, t)), out((n + offset) * size);
        auto at = [&](const DeviceBuffer& d) { return static_cast<char*>(d.get()) + skip; };
        auto values = [&] {
          std::vector<float> v = out.Values(t);
          return std::vector<float>(v.begin() + offset, v.end());
        };
        ASSERT_EQ(cuda::Add(at(da), at(db), at(out), t, n, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(AllNear(values(), Round(sum, t)));
        ASSERT_EQ(cuda::AddRelu(at(da), at(db), at(out), t, n, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(AllNear(values(), sum_relu));
        ASSERT_EQ(cuda::ReluForward(at(da), at(out), t, n, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(AllNear(values(), relu));
        ASSERT_EQ(cuda::ReluBackward(at(da), at(db), at(out), t, n, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(AllNear(values(), relu_grad));
      }
    }
  }
}

TEST(KernelsTest, TransposesMatchHostAndInvertEachOther) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  struct Shape {
    int64_t n, c, s;
  };
  // Odd sizes, a 3×3 conv weight, and more tiles than the grid has blocks.
  for (Shape sh :
       {Shape{1, 1, 1}, Shape{3, 17, 33}, Shape{2, 64, 1024}, Shape{5, 3, 9}, Shape{70001, 2, 3}}) {
    const int64_t size = sh.n * sh.c * sh.s;
    for (Elem t : kTypes) {
      SCOPED_TRACE(testing::Message() << sh.n << "x" << sh.c << "x" << sh.s << " " << Name(t));
      const std::vector<float> x = Random(size, size, t);
      std::vector<float> want(size);
      for (int64_t b = 0; b < sh.n; ++b) {
        for (int64_t c = 0; c < sh.c; ++c) {
          for (int64_t s = 0; s < sh.s; ++s) {
            want[(b * sh.s + s) * sh.c + c] = x[(b * sh.c + c) * sh.s + s];
          }
        }
      }
      DeviceBuffer dx(Encode(x, t)), dy(size * Size(t)), dz(size * Size(t));
      ASSERT_EQ(cuda::NcsToNsc(dx.get(), sh.n, sh.c, sh.s, dy.get(), t, nullptr), cudaSuccess);
      ASSERT_EQ(cuda::NscToNcs(dy.get(), sh.n, sh.c, sh.s, dz.get(), t, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(AllNear(dy.Values(t), want));
      EXPECT_TRUE(AllNear(dz.Values(t), x));
    }
  }
}

TEST(KernelsTest, RowBiasAndColumnSumsMatchHost) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  struct Shape {
    int64_t rows, cols;
  };
  // Few rows (one chunk), a LeNet convolution's bias gradient (6 columns of 200,704 rows:
  // many chunks), more rows than kMaxChunks chunks of the least rows hold.
  for (Shape sh : {Shape{1, 1}, Shape{1000, 37}, Shape{3, 5000}, Shape{0, 7}, Shape{200704, 6},
                   Shape{300001, 33}}) {
    const int64_t size = sh.rows * sh.cols;
    for (Elem t : kTypes) {
      SCOPED_TRACE(testing::Message() << sh.rows << "x" << sh.cols << " " << Name(t));
      const std::vector<float> y = Random(size, 1, t), b = Random(sh.cols, 2, t);
      std::vector<float> biased(size);
      std::vector<double> sums(sh.cols, 0.0);
      for (int64_t r = 0; r < sh.rows; ++r) {
        for (int64_t c = 0; c < sh.cols; ++c) {
          biased[r * sh.cols + c] = y[r * sh.cols + c] + b[c];
          sums[c] += y[r * sh.cols + c];
        }
      }
      DeviceBuffer dy(Encode(y, t)), dbias(Encode(b, t)), dsums(sh.cols * Size(t)),
          workspace(cuda::ColumnSumsWorkspaceBytes(sh.rows, sh.cols));
      // Sums first: the bias is added in place.
      ASSERT_EQ(cuda::ColumnSums(dy.get(), sh.rows, sh.cols, dsums.get(), t, workspace.get(),
                                 nullptr),
                cudaSuccess);
      ASSERT_EQ(cuda::AddRowBias(dy.get(), dbias.get(), sh.rows, sh.cols, t, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // fp32 accumulation error grows with the rows; then one rounding to the type.
      EXPECT_TRUE(AllNear(dsums.Values(t), sums, 2 * Eps(t), 1e-7 * sh.rows));
      EXPECT_TRUE(AllNear(dy.Values(t), Round(biased, t)));
    }
  }
}

TEST(KernelsTest, SubsamplePadMatchesHostInBothLayouts) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  struct Shape {
    int64_t n, c, h, w;
  };
  for (Shape sh : {Shape{2, 3, 7, 5}, Shape{3, 4, 8, 6}, Shape{1, 1, 1, 1}}) {
    for (bool nhwc : {false, true}) {
      for (int stride : {1, 2}) {
        for (int64_t pad : {int64_t{0}, int64_t{3}}) {
          const int64_t yc = sh.c + 2 * pad, yh = (sh.h + stride - 1) / stride,
                        yw = (sh.w + stride - 1) / stride;
          // Element (b, ch, i, j) of a (·, c, h, w) tensor in the layout under test.
          auto at = [nhwc](int64_t b, int64_t ch, int64_t i, int64_t j, int64_t c, int64_t h,
                           int64_t w) {
            return nhwc ? ((b * h + i) * w + j) * c + ch : ((b * c + ch) * h + i) * w + j;
          };
          const int64_t xsize = sh.n * sh.c * sh.h * sh.w, ysize = sh.n * yc * yh * yw;
          for (Elem t : kTypes) {
            SCOPED_TRACE(testing::Message()
                         << sh.n << "x" << sh.c << "x" << sh.h << "x" << sh.w << " nhwc=" << nhwc
                         << " stride=" << stride << " pad=" << pad << " " << Name(t));
            const std::vector<float> x = Random(xsize, 1, t), dy = Random(ysize, 2, t);
            std::vector<float> y(ysize, 0.0f), dx(xsize, 0.0f);
            for (int64_t b = 0; b < sh.n; ++b) {
              for (int64_t ch = 0; ch < sh.c; ++ch) {
                for (int64_t i = 0; i < yh; ++i) {
                  for (int64_t j = 0; j < yw; ++j) {
                    y[at(b, ch + pad, i, j, yc, yh, yw)] =
                        x[at(b, ch, i * stride, j * stride, sh.c, sh.h, sh.w)];
                    dx[at(b, ch, i * stride, j * stride, sh.c, sh.h, sh.w)] =
                        dy[at(b, ch + pad, i, j, yc, yh, yw)];
                  }
                }
              }
            }
            DeviceBuffer d_x(Encode(x, t)), d_y(ysize * Size(t)), d_dy(Encode(dy, t)),
                d_dx(xsize * Size(t));
            ASSERT_EQ(cuda::SubsamplePadForward(d_x.get(), sh.n, sh.c, sh.h, sh.w, stride, pad,
                                                nhwc, d_y.get(), t, nullptr),
                      cudaSuccess);
            ASSERT_EQ(cuda::SubsamplePadBackward(d_dy.get(), sh.n, sh.c, sh.h, sh.w, stride, pad,
                                                 nhwc, d_dx.get(), t, nullptr),
                      cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            EXPECT_TRUE(AllNear(d_y.Values(t), y));
            EXPECT_TRUE(AllNear(d_dx.Values(t), dx));
          }
        }
      }
    }
  }
}

TEST(KernelsTest, SoftmaxCrossEntropyMatchesDoubleReference) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  struct Shape {
    int64_t n, k;
  };
  for (Shape sh : {Shape{1, 1}, Shape{1, 10}, Shape{257, 10}, Shape{64, 1000}, Shape{3, 5000}}) {
    const int64_t size = sh.n * sh.k;
    Rng rng(size);
    std::vector<int32_t> labels(sh.n);
    for (auto& l : labels) l = static_cast<int32_t>(rng.Below(sh.k));
    const float dloss = 2.5f;
    DeviceBuffer dlabels(labels), d_dloss(std::vector<float>{dloss});
    for (Elem t : kTypes) {
      SCOPED_TRACE(testing::Message() << sh.n << "x" << sh.k << " " << Name(t));
      std::vector<float> logits(size);
      for (int64_t i = 0; i < size; ++i) {
        // Row 0 is shifted far enough up that exp() without the max subtracted overflows.
        logits[i] = static_cast<float>(rng.Uniform(-8, 8) + (i < sh.k ? 100 : 0));
      }
      logits = Round(logits, t);
      std::vector<double> probs(size), dlogits(size);
      double loss = 0;
      for (int64_t r = 0; r < sh.n; ++r) {
        const float* x = &logits[r * sh.k];
        const double max = *std::max_element(x, x + sh.k);
        double sum = 0;
        for (int64_t j = 0; j < sh.k; ++j) sum += std::exp(x[j] - max);
        for (int64_t j = 0; j < sh.k; ++j) {
          probs[r * sh.k + j] = std::exp(x[j] - max) / sum;
          dlogits[r * sh.k + j] = (probs[r * sh.k + j] - (j == labels[r] ? 1 : 0)) * dloss / sh.n;
        }
        loss += std::log(sum) - (x[labels[r]] - max);
      }
      loss /= sh.n;

      DeviceBuffer dlogits_in(Encode(logits, t)), dprobs(size * 4), drow_loss(sh.n * 4),
          dloss_out(4), dgrad(size * Size(t));
      ASSERT_EQ(cuda::SoftmaxCrossEntropyForward(dlogits_in.get(), dlabels.as<int32_t>(), sh.n,
                                                 sh.k, t, dprobs.as<float>(), drow_loss.as<float>(),
                                                 dloss_out.as<float>(), nullptr),
                cudaSuccess);
      ASSERT_EQ(
          cuda::SoftmaxCrossEntropyBackward(dprobs.as<float>(), dlabels.as<int32_t>(), sh.n, sh.k,
                                            d_dloss.as<float>(), dgrad.get(), t, nullptr),
          cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(AllNear(dprobs.Get<float>(), probs, 1e-5, 1e-7));
      EXPECT_TRUE(AllNear(dloss_out.Get<float>(), std::vector<double>{loss}, 1e-5, 1e-6));
      // Gradients of tiny probabilities underflow in f16: at most half its smallest subnormal.
      EXPECT_TRUE(AllNear(dgrad.Values(t), dlogits, 2 * Eps(t) + 1e-5,
                          std::max(1e-6 * dloss / sh.n, HalfSmallest(t))));
    }
  }
}

TEST(KernelsTest, SoftmaxCrossEntropyLabelOutOfRangeGivesNanLoss) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  const int64_t n = 4, k = 10;
  for (int32_t bad : {-1, 10}) {
    DeviceBuffer logits(Encode(Random(n * k, 1, Elem::kF32), Elem::kF32));
    DeviceBuffer labels(std::vector<int32_t>{3, 0, bad, 9});
    DeviceBuffer probs(n * k * 4), row_loss(n * 4), loss(4);
    ASSERT_EQ(cuda::SoftmaxCrossEntropyForward(logits.get(), labels.as<int32_t>(), n, k, Elem::kF32,
                                               probs.as<float>(), row_loss.as<float>(),
                                               loss.as<float>(), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(std::isnan(loss.Get<float>()[0])) << bad;
  }
}

// The replicas' weighted sum gives the host reduction's bits: each product and sum rounded
// alone, in replica order (a fused multiply-add would round differently).
TEST(KernelsTest, WeightedSumMatchesTheHostsBits) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  for (int64_t n : {int64_t{1}, int64_t{1000003}}) {
    for (Elem t : kTypes) {
      for (int count : {1, 3, cuda::kMaxReplicaTerms}) {
        SCOPED_TRACE(testing::Message() << n << " " << Name(t) << " replicas=" << count);
        std::vector<std::vector<float>> g;
        std::vector<std::unique_ptr<DeviceBuffer>> on_device;
        cuda::ReplicaTerms terms;
        terms.count = count;
        for (int r = 0; r < count; ++r) {
          g.push_back(Random(n, 100 + r, t, -3, 3));
          on_device.push_back(std::make_unique<DeviceBuffer>(Encode(g.back(), t)));
          terms.g[r] = on_device.back()->get();
          terms.w[r] = static_cast<float>(r + 7) / 97.0f;  // rounded weights, as 17/33 is
        }
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; ++i) {
          float s = g[0][i] * terms.w[0];
          for (int r = 1; r < count; ++r) {
            const volatile float product = terms.w[r] * g[r][i];  // rounded on its own
            s += product;
          }
          want[i] = s;
        }
        DeviceBuffer sum(n * 4);
        ASSERT_EQ(cuda::WeightedSumToF32(terms, t, n, static_cast<float*>(sum.get()), nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(sum.Values(Elem::kF32) == want);
      }
    }
  }
  cuda::ReplicaTerms too_many;
  too_many.count = cuda::kMaxReplicaTerms + 1;
  EXPECT_EQ(cuda::WeightedSumToF32(too_many, Elem::kF32, 4, nullptr, nullptr),
            cudaErrorInvalidValue);
}

TEST(KernelsTest, UnscaleToF32FlagsInfAndNan) {
  auto gpus = cuda::ProbeGpus();
  if (!gpus.ok()) GTEST_SKIP() << "needs a GPU: " << gpus.status();
  const float inv_scale = 0.3f;  // not a power of two: the product rounds
  for (int64_t n : {int64_t{1}, int64_t{1000003}}) {
    for (Elem t : kTypes) {
      std::vector<float> g = Random(n, 7, t, -1000, 1000);
      for (float poison :
           {0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
            std::numeric_limits<float>::quiet_NaN()}) {
        SCOPED_TRACE(testing::Message() << n << " " << Name(t) << " poison=" << poison);
        if (poison != 0) g[n / 2] = poison;
        std::vector<float> want(n);
        for (int64_t i = 0; i < n; ++i) want[i] = g[i] * inv_scale;
        DeviceBuffer dg(Encode(g, t)), out(n * 4), found(std::vector<int>{0});
        ASSERT_EQ(cuda::UnscaleToF32(dg.get(), t, n, inv_scale, out.as<float>(), found.as<int>(),
                                     nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(AllNear(out.Get<float>(), want));
        EXPECT_EQ(found.Get<int>()[0], poison != 0 ? 1 : 0);
      }
    }
  }
  // A set flag stays set over finite gradients.
  const int64_t n = 100;
  DeviceBuffer g(Encode(Random(n, 8, Elem::kF32), Elem::kF32)), out(n * 4),
      found(std::vector<int>{1});
  ASSERT_EQ(
      cuda::UnscaleToF32(g.get(), Elem::kF32, n, 1, out.as<float>(), found.as<int>(), nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(found.Get<int>()[0], 1);
}

}  // namespace
}  // namespace cohort
