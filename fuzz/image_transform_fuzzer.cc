// A training and an evaluation sample of any bytes as a JPEG, at sizes and channels the first
// bytes pick: the crop, the scaled decode and the resampling stay inside their buffers.

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "trainer/data/image_transform.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  cohort::ImageTransformOptions options;
  options.train_size = 1 + data[0] % 48;
  options.eval_size = 1 + data[1] % 48;
  options.eval_resize = options.eval_size + data[2] % 16;
  options.channels = data[3] % 2 == 0 ? 3 : 1;
  options.random_resized_crop = (data[3] & 2) != 0;
  options.horizontal_flip = (data[3] & 4) != 0;
  const absl::string_view jpeg(reinterpret_cast<const char*>(data) + 4, size - 4);
  cohort::ImageTransformer transformer(options);
  std::vector<float> train(static_cast<size_t>(options.channels) * options.train_size *
                           options.train_size);
  std::vector<float> eval(static_cast<size_t>(options.channels) * options.eval_size *
                          options.eval_size);
  if (transformer.Train(jpeg, 1, 2, 3, "fuzz input", train.data()).ok()) {
    for (const float v : train) {
      if (!std::isfinite(v)) __builtin_trap();
    }
  }
  if (transformer.Eval(jpeg, "fuzz input", eval.data()).ok()) {
    for (const float v : eval) {
      if (!std::isfinite(v)) __builtin_trap();
    }
  }
  return 0;
}
