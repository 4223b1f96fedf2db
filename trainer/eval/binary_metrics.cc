#include "trainer/eval/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace cohort {
namespace {

absl::Status CheckLabels(size_t values, absl::Span<const int32_t> labels, const char* what) {
  if (values != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(values, " ", what, " for ", labels.size(), " labels"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", i, " is ", labels[i], "; a binary label is 0 or 1"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> RocAuc(absl::Span<const float> scores, absl::Span<const int32_t> labels) {
  if (absl::Status s = CheckLabels(scores.size(), labels, "scores"); !s.ok()) return s;
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // The positives' ranks summed, a tie's samples each at the tie's mean rank.
  double positive_ranks = 0;
  int64_t positives = 0;
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    int64_t tied_positives = 0;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) {
      tied_positives += labels[order[end]];
      ++end;
    }
    const double mean_rank = 0.5 * static_cast<double>(begin + 1 + end);  // ranks from 1
    positive_ranks += mean_rank * static_cast<double>(tied_positives);
    positives += tied_positives;
    begin = end;
  }
  const int64_t negatives = static_cast<int64_t>(scores.size()) - positives;
  if (positives == 0 || negatives == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("ROC AUC of ", scores.size(), " samples of which ", positives,
                     " are positive: it needs both classes (evaluate on more samples)"));
  }
  const double p = static_cast<double>(positives);
  return (positive_ranks - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

absl::StatusOr<double> LogLoss(absl::Span<const float> p, absl::Span<const int32_t> labels) {
  if (absl::Status s = CheckLabels(p.size(), labels, "probabilities"); !s.ok()) return s;
  if (p.empty()) return absl::FailedPreconditionError("log loss of no samples");
  constexpr double kClip = 1e-7;
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(static_cast<double>(p[i]), kClip, 1 - kClip);
    sum -= labels[i] == 1 ? std::log(q) : std::log1p(-q);
  }
  return sum / static_cast<double>(p.size());
}

}  // namespace cohort
