#include "trainer/ops/embedding_bag.h"

#include <algorithm>

#include "trainer/base/check.h"

namespace cohort {
namespace {

class HostEmbeddingBagOp final : public Op {
 public:
  explicit HostEmbeddingBagOp(const EmbeddingBagSpec& spec) : spec_(spec) {}
  absl::string_view name() const override { return "embedding_bag"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    absl::StatusOr<Shape> y = EmbeddingBagOutputShape(in);
    if (!y.ok()) return y.status();
    return std::vector<Shape>{*y};
  }

  // Backward reads the indices and offsets, not the output.
  BackwardReads ReadsInBackward() const override { return {true, false}; }

  void Forward(Mode, absl::Span<const Tensor* const> in, absl::Span<Tensor* const> out) override {
    if (in[0]->dtype() == DType::kF64) return ForwardOf<double>(in, out);
    ForwardOf<float>(in, out);
  }

  void Backward(absl::Span<const Tensor* const> in, absl::Span<const Tensor* const>,
                absl::Span<const Tensor* const> grad_out,
                absl::Span<Tensor* const> grad_in) override {
    if (grad_in[0] == nullptr) return;
    if (in[0]->dtype() == DType::kF64) return BackwardOf<double>(in, grad_out, grad_in);
    BackwardOf<float>(in, grad_out, grad_in);
  }

 private:
  // T: the rows' element type, F32 or F64 (the reference backend's).
  template <typename T>
  void ForwardOf(absl::Span<const Tensor* const> in, absl::Span<Tensor* const> out) const {
    const int64_t dim = in[0]->shape()[1];
    const T* rows = in[0]->data<T>();
    T* y = out[0]->data<T>();
    ForEachBag(in, [&](int64_t b, absl::Span<const int32_t> bag) {
      T* yb = y + b * dim;
      std::fill(yb, yb + dim, T{0});
      for (int32_t r : bag) {
        const T* row = rows + static_cast<int64_t>(r) * dim;
        for (int64_t i = 0; i < dim; ++i) yb[i] += row[i];
      }
      if (Mean() && !bag.empty()) {
        const T count = static_cast<T>(bag.size());
        for (int64_t i = 0; i < dim; ++i) yb[i] /= count;
      }
    });
  }

  template <typename T>
  void BackwardOf(absl::Span<const Tensor* const> in, absl::Span<const Tensor* const> grad_out,
                  absl::Span<Tensor* const> grad_in) const {
    const int64_t dim = in[0]->shape()[1];
    const T* dy = grad_out[0]->data<T>();
    absl::Span<T> drows = grad_in[0]->span<T>();
    std::fill(drows.begin(), drows.end(), T{0});
    ForEachBag(in, [&](int64_t b, absl::Span<const int32_t> bag) {
      const T* dyb = dy + b * dim;
      const T count = static_cast<T>(bag.size());
      for (int32_t r : bag) {
        T* drow = drows.data() + static_cast<int64_t>(r) * dim;
        for (int64_t i = 0; i < dim; ++i) drow[i] += Mean() ? dyb[i] / count : dyb[i];
      }
    });
  }

  bool Mean() const { return spec_.pooling == EmbeddingBagSpec::Pooling::kMean; }

  // Calls f(b, bag b's row indices) for every bag in order; the indices and offsets are the
  // caller's to get right (a wrong one is a bug, not an input error).
  template <typename F>
  static void ForEachBag(absl::Span<const Tensor* const> in, F f) {
    const int64_t num_rows = in[0]->shape()[0];
    const absl::Span<const int32_t> indices = in[1]->span<int32_t>();
    const absl::Span<const int32_t> offsets = in[2]->span<int32_t>();
    const int64_t length = static_cast<int64_t>(indices.size());
    for (size_t b = 0; b < offsets.size(); ++b) {
      const int64_t begin = offsets[b];
      const int64_t end = b + 1 < offsets.size() ? offsets[b + 1] : length;
      COHORT_CHECK((b > 0 || begin == 0) && begin <= end && end <= length,
                   "embedding_bag: bag %zu spans [%ld, %ld) of %ld indices", b, begin, end, length);
      const absl::Span<const int32_t> bag = indices.subspan(begin, end - begin);
      for (int32_t r : bag) {
        COHORT_CHECK(r >= 0 && r < num_rows, "embedding_bag: bag %zu names row %d of %ld", b, r,
                     num_rows);
      }
      f(static_cast<int64_t>(b), bag);
    }
  }

  const EmbeddingBagSpec spec_;
};

}  // namespace

std::unique_ptr<Op> MakeHostEmbeddingBag(const EmbeddingBagSpec& spec) {
  return std::make_unique<HostEmbeddingBagOp>(spec);
}

}  // namespace cohort
