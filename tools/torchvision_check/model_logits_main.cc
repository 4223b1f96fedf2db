// model_logits: Cohort's own evaluation logits of an exported model.
//   model_logits --model_file=M.safetensors --images=x.f32 --logits=y.f32
// x.f32 holds N images of the model's input shape (its metadata's input_shape) as raw float32s
// in (N, C, H, W) order; y.f32 receives the (N, K) logits of one evaluation-mode forward on the
// CPU backend, raw float32 in row order. Prints "logits N K"; exits 2 on an error.

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "tools/torchvision_check/model_logits.h"
#include "trainer/cli/args.h"
#include "trainer/ops/cpu/onednn_backend.h"

ABSL_FLAG(std::string, model_file, "", "the .safetensors file the trainer exported");
ABSL_FLAG(std::string, images, "", "raw float32 images (N, C, H, W) of the model's input shape");
ABSL_FLAG(std::string, logits, "", "where the (N, K) float32 logits go");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes an exported model's evaluation logits for raw float32 images.");
  if (!cohort::ParseCanonicalCommandLine("model_logits", argc, argv, {})) return 2;
  auto fail = [](const absl::Status& status) {
    std::cerr << "model_logits: error: " << status.message() << "\n";
    return 2;
  };
  cohort::OnednnBackend backend;
  auto model = cohort::LoadExportedModel(absl::GetFlag(FLAGS_model_file), &backend);
  if (!model.ok()) return fail(model.status());
  auto images = cohort::ReadRawImages(absl::GetFlag(FLAGS_images), (*model)->input_shape());
  if (!images.ok()) return fail(images.status());
  const cohort::Tensor& logits = (*model)->Forward(cohort::Mode::kEval, *images);
  if (absl::Status written = cohort::WriteRawFloats(absl::GetFlag(FLAGS_logits), logits);
      !written.ok()) {
    return fail(written);
  }
  std::cout << "logits " << logits.shape()[0] << " " << logits.shape()[1] << "\n";
  return 0;
}
