#include "trainer/ops/op.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/random.h"
#include "trainer/base/status_macros.h"
#include "trainer/ops/click_model_ops.h"
#include "trainer/ops/embedding_bag.h"
#include "trainer/ops/op_frames.h"

namespace cohort {
namespace {

// Flatten keeps row-major data as is: the copy is the whole op, for any dtype on the host.
class FlattenOp final : public Op {
 public:
  absl::string_view name() const override { return "flatten"; }

  absl::StatusOr<std::vector<Shape>> OutputShapes(absl::Span<const Shape> in) const override {
    RETURN_IF_ERROR(ExpectInputCount(name(), in, 1));
    if (in[0].rank() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("flatten: input ", in[0].ToString(), " needs a batch dimension and more"));
    }
    return std::vector<Shape>{Shape{in[0][0], in[0].numel() / std::max<int64_t>(in[0][0], 1)}};
  }

  void Forward(Mode, absl::Span<const Tensor* const> in, absl::Span<Tensor* const> out) override {
    std::memcpy(out[0]->raw(), in[0]->raw(), in[0]->nbytes());
  }

  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Backward(absl::Span<const Tensor* const>, absl::Span<const Tensor* const>,
                absl::Span<const Tensor* const> grad_out,
                absl::Span<Tensor* const> grad_in) override {
    if (grad_in[0] != nullptr) {
      std::memcpy(grad_in[0]->raw(), grad_out[0]->raw(), grad_out[0]->nbytes());
    }
  }
};

// x_i (N, C_i, H, W) is, in every sample, one contiguous block of y (N, ΣC, H, W): the
// concatenation and its gradient are block copies, for any dtype on the host.
class HostConcatOp final : public ConcatFrame {
 public:
  // Only the shapes, which say where each input's slice lies.
  BackwardReads ReadsInBackward() const override { return {false, false}; }

  void Forward(Mode, absl::Span<const Tensor* const> in, absl::Span<Tensor* const> out) override {
    auto* y = static_cast<char*>(out[0]->raw());
    ForEachBlock(in, *out[0], [&](size_t i, size_t x_at, size_t y_at, size_t bytes) {
      std::memcpy(y + y_at, static_cast<const char*>(in[i]->raw()) + x_at, bytes);
    });
  }

  void Backward(absl::Span<const Tensor* const> in, absl::Span<const Tensor* const>,
                absl::Span<const Tensor* const> grad_out,
                absl::Span<Tensor* const> grad_in) override {
    const auto* dy = static_cast<const char*>(grad_out[0]->raw());
    ForEachBlock(in, *grad_out[0], [&](size_t i, size_t x_at, size_t y_at, size_t bytes) {
      if (grad_in[i] == nullptr) return;
      std::memcpy(static_cast<char*>(grad_in[i]->raw()) + x_at, dy + y_at, bytes);
    });
  }

 private:
  // Calls f(input, byte offset in it, byte offset in y, bytes) for every sample's block of
  // every input, in y's order.
  template <typename F>
  static void ForEachBlock(absl::Span<const Tensor* const> in, const Tensor& y, F f) {
    const int64_t samples = y.shape()[0];
    if (samples == 0) return;
    size_t y_at = 0;
    for (int64_t n = 0; n < samples; ++n) {
      for (size_t i = 0; i < in.size(); ++i) {
        const size_t bytes = in[i]->nbytes() / static_cast<size_t>(samples);
        f(i, static_cast<size_t>(n) * bytes, y_at, bytes);
        y_at += bytes;
      }
    }
  }
};

absl::Status ShapeError(absl::string_view op, absl::string_view what,
                        std::initializer_list<const Shape*> shapes) {
  std::string list;
  for (const Shape* s : shapes) absl::StrAppend(&list, list.empty() ? "" : ", ", s->ToString());
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " (inputs ", list, ")"));
}

}  // namespace

std::unique_ptr<Op> Backend::Flatten() { return std::make_unique<FlattenOp>(); }
std::unique_ptr<Op> Backend::Concat() { return std::make_unique<HostConcatOp>(); }
std::unique_ptr<Op> Backend::EmbeddingBag(const EmbeddingBagSpec& spec) {
  return MakeHostEmbeddingBag(spec);
}
std::unique_ptr<Op> Backend::DotInteraction() { return MakeHostDotInteraction(); }
std::unique_ptr<Op> Backend::BinaryCrossEntropy() { return MakeHostBinaryCrossEntropy(); }

absl::Status ExpectInputCount(absl::string_view op, absl::Span<const Shape> in, size_t count) {
  if (in.size() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expects ", count, " inputs, got ", in.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> Conv2dOutputShape(const Conv2dSpec& spec, absl::Span<const Shape> in) {
  RETURN_IF_ERROR(ExpectInputCount("conv2d", in, spec.bias ? 3 : 2));
  const Shape& x = in[0];
  const Shape& w = in[1];
  const Shape no_bias{w.rank() > 0 ? w[0] : 0};
  const Shape& b = spec.bias ? in[2] : no_bias;
  if (x.rank() != 4 || w.rank() != 4 || b.rank() != 1) {
    return ShapeError("conv2d", "want x (N,C,H,W), w (O,C,KH,KW), b (O)", {&x, &w, &b});
  }
  if (x[1] != w[1] || b[0] != w[0]) {
    return ShapeError("conv2d", "channel counts disagree", {&x, &w, &b});
  }
  if (spec.stride < 1 || spec.padding < 0) {
    return ShapeError("conv2d", absl::StrCat("bad stride ", spec.stride, " or padding ", spec.padding),
                      {&x, &w, &b});
  }
  const int64_t oh = (x[2] + 2 * spec.padding - w[2]) / spec.stride + 1;
  const int64_t ow = (x[3] + 2 * spec.padding - w[3]) / spec.stride + 1;
  if (x[2] + 2 * spec.padding < w[2] || x[3] + 2 * spec.padding < w[3]) {
    return ShapeError("conv2d", "kernel larger than the padded input", {&x, &w, &b});
  }
  return Shape{x[0], w[0], oh, ow};
}

int64_t Pool2dOutputSize(const Pool2dSpec& spec, int64_t in) {
  const int64_t span = in + 2 * spec.padding - spec.kernel;
  if (!spec.ceil_mode) return span / spec.stride + 1;
  const int64_t out = (span + spec.stride - 1) / spec.stride + 1;
  // PyTorch drops a last window that would start in the right padding (it would see no pixel).
  return (out - 1) * spec.stride >= in + spec.padding ? out - 1 : out;
}

absl::StatusOr<Shape> Pool2dOutputShape(absl::string_view op, const Pool2dSpec& spec,
                                        const Shape& x) {
  if (x.rank() != 4) return ShapeError(op, "want x (N,C,H,W)", {&x});
  if (spec.kernel < 1 || spec.stride < 1 || spec.padding < 0 || spec.padding * 2 > spec.kernel) {
    return ShapeError(op,
                      absl::StrCat("bad kernel ", spec.kernel, ", stride ", spec.stride,
                                   " or padding ", spec.padding),
                      {&x});
  }
  if (x[2] + 2 * spec.padding < spec.kernel || x[3] + 2 * spec.padding < spec.kernel) {
    return ShapeError(op, "kernel larger than the padded input", {&x});
  }
  return Shape{x[0], x[1], Pool2dOutputSize(spec, x[2]), Pool2dOutputSize(spec, x[3])};
}

absl::StatusOr<Shape> LinearOutputShape(const Shape& x, const Shape& w, const Shape& b) {
  if (x.rank() != 2 || w.rank() != 2 || b.rank() != 1 || x[1] != w[1] || b[0] != w[0]) {
    return ShapeError("linear", "want x (N,I), w (O,I), b (O)", {&x, &w, &b});
  }
  return Shape{x[0], w[0]};
}

absl::StatusOr<Shape> SoftmaxCrossEntropyOutputShape(const Shape& logits, const Shape& labels) {
  if (logits.rank() != 2 || labels.rank() != 1 || logits[0] != labels[0]) {
    return ShapeError("softmax_cross_entropy", "want logits (N,K), labels (N)", {&logits, &labels});
  }
  return Shape{};
}

absl::StatusOr<Shape> EmbeddingBagOutputShape(absl::Span<const Shape> in) {
  RETURN_IF_ERROR(ExpectInputCount("embedding_bag", in, 3));
  const Shape& rows = in[0];
  const Shape& indices = in[1];
  const Shape& offsets = in[2];
  if (rows.rank() != 2 || indices.rank() != 1 || offsets.rank() != 1) {
    return ShapeError("embedding_bag", "want rows (U,D), indices (L), offsets (B)",
                      {&rows, &indices, &offsets});
  }
  return Shape{offsets[0], rows[1]};
}

absl::StatusOr<Shape> DotInteractionOutputShape(const Shape& x) {
  if (x.rank() != 3 || x[1] < 2) {
    return ShapeError("dot_interaction", "want x (N,F,D) with F >= 2", {&x});
  }
  return Shape{x[0], x[1] * (x[1] - 1) / 2};
}

absl::StatusOr<Shape> BinaryCrossEntropyOutputShape(const Shape& logits, const Shape& labels) {
  if (logits.rank() != 1 || labels.rank() != 1 || logits[0] != labels[0]) {
    return ShapeError("binary_cross_entropy", "want logits (N), labels (N)", {&logits, &labels});
  }
  return Shape{};
}

absl::StatusOr<Shape> GlobalAvgPoolOutputShape(const Shape& x) {
  if (x.rank() != 4 || x[2] < 1 || x[3] < 1) {
    return ShapeError("global_avg_pool", "want x (N,C,H,W) with H, W >= 1", {&x});
  }
  return Shape{x[0], x[1]};
}

absl::StatusOr<Shape> BatchNormOutputShape(const BatchNormSpec& spec, absl::Span<const Shape> in) {
  RETURN_IF_ERROR(ExpectInputCount("batch_norm", in, 3));
  const Shape& x = in[0];
  if (x.rank() != 4 || x[1] != spec.channels || in[1] != Shape{spec.channels} ||
      in[2] != Shape{spec.channels}) {
    return ShapeError("batch_norm",
                      absl::StrCat("want x (N,", spec.channels, ",H,W), gamma and beta (",
                                   spec.channels, ")"),
                      {&in[0], &in[1], &in[2]});
  }
  return x;
}

absl::StatusOr<Shape> AddOutputShape(absl::Span<const Shape> in) {
  RETURN_IF_ERROR(ExpectInputCount("add", in, 2));
  if (in[0] != in[1]) return ShapeError("add", "shapes differ", {&in[0], &in[1]});
  return in[0];
}

absl::StatusOr<Shape> ConcatOutputShape(absl::Span<const Shape> in) {
  if (in.empty()) return absl::InvalidArgumentError("concat: expects at least one input");
  int64_t channels = 0;
  for (const Shape& x : in) {
    if (x.rank() != 4 || x[0] != in[0][0] || x[2] != in[0][2] || x[3] != in[0][3]) {
      std::string list;
      for (const Shape& s : in) absl::StrAppend(&list, list.empty() ? "" : ", ", s.ToString());
      return absl::InvalidArgumentError(absl::StrCat(
          "concat: want inputs (N,C_i,H,W) that differ only in C_i (inputs ", list, ")"));
    }
    channels += x[1];
  }
  return Shape{in[0][0], channels, in[0][2], in[0][3]};
}

absl::StatusOr<Shape> SubsamplePadOutputShape(const SubsamplePadSpec& spec, const Shape& x) {
  if (x.rank() != 4 || spec.stride < 1 || spec.pad_channels < 0) {
    return ShapeError("subsample_pad",
                      absl::StrCat("want x (N,C,H,W), stride >= 1 (", spec.stride,
                                   "), pad_channels >= 0 (", spec.pad_channels, ")"),
                      {&x});
  }
  return Shape{x[0], x[1] + 2 * spec.pad_channels, (x[2] + spec.stride - 1) / spec.stride,
               (x[3] + spec.stride - 1) / spec.stride};
}

void DropoutMask(const DropoutSpec& spec, uint64_t call, absl::Span<uint8_t> mask) {
  Rng rng(MixKeys({spec.seed, call}));
  for (uint8_t& m : mask) m = rng.Uniform() >= spec.p ? 1 : 0;
}

}  // namespace cohort
