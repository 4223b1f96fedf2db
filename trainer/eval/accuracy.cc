#include "trainer/eval/accuracy.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace cohort {

void CountTopK(const Tensor& logits, const Tensor& labels, Accuracy* acc) {
  const int64_t n = logits.shape()[0], k = logits.shape()[1];
  const float* z = logits.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels.data<int32_t>()[i];
    const float* row = z + i * k;
    int64_t above = 0;  // classes ranked before the label
    for (int64_t j = 0; j < k; ++j) {
      if (row[j] > row[label] || (row[j] == row[label] && j < label)) ++above;
    }
    acc->top1 += above < 1;
    acc->top5 += above < 5;
  }
  acc->count += n;
}

absl::StatusOr<Accuracy> Evaluate(Model* model, SampleSource* data, int64_t batch) {
  Accuracy acc;
  Tensor images;
  Tensor labels(Shape{0}, DType::kI32);
  std::vector<int64_t> indices;
  for (int64_t start = 0; start < data->size(); start += batch) {
    indices.resize(static_cast<size_t>(std::min(batch, data->size() - start)));
    std::iota(indices.begin(), indices.end(), start);
    if (absl::Status gathered = data->Gather(indices, nullptr, &images, &labels); !gathered.ok()) {
      return gathered;
    }
    const Tensor& logits = model->Forward(Mode::kEval, images);
    if (IsHostTensorOf(logits, DType::kF32)) {
      CountTopK(logits, labels, &acc);
    } else {
      CountTopK(ToHost(logits, DType::kF32), labels, &acc);
    }
  }
  return acc;
}

}  // namespace cohort
