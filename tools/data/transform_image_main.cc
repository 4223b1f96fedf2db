// One image through Cohort's decoder and transforms, written out raw for an outside check
// (tools/data/pil_parity_test.py holds them against PIL and torchvision):
//   transform_image --image=x.jpg --mode=eval --out=x.f32
// decode: the decoded pixels, height x width x 3 bytes; eval / train: the sample,
// (C, size, size) float32 grey levels (0-255, not normalised); train also prints its crop box
// and flip ("box x0 y0 x1 y1 flip 0|1").
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "trainer/io/whole_file.h"
#include "trainer/cli/args.h"
#include "trainer/data/image_transform.h"
#include "trainer/data/jpeg.h"

ABSL_FLAG(std::string, image, "", "the JPEG");
ABSL_FLAG(std::string, mode, "eval", "decode, eval or train");
ABSL_FLAG(int, size, 224, "the sample's side");
ABSL_FLAG(int, resize, 256, "eval: the shorter side resized to this before the centre crop");
ABSL_FLAG(int, channels, 3, "3 (RGB) or 1 (grey)");
ABSL_FLAG(uint64_t, seed, 0, "train: the crop's keys");
ABSL_FLAG(int64_t, epoch, 0, "");
ABSL_FLAG(int64_t, index, 0, "");
ABSL_FLAG(std::string, out, "", "where to write the result");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Writes one image as Cohort decodes and transforms it.");
  if (!cohort::ParseCanonicalCommandLine("transform_image", argc, argv, {})) return 2;
  const std::string path = absl::GetFlag(FLAGS_image), mode = absl::GetFlag(FLAGS_mode);
  absl::StatusOr<std::string> bytes = cohort::ReadWholeFile(path);
  if (!bytes.ok()) {
    std::cerr << "transform_image: error: " << bytes.status().message() << "\n";
    return 1;
  }
  std::ofstream out(absl::GetFlag(FLAGS_out), std::ios::binary | std::ios::trunc);
  if (mode == "decode") {
    absl::StatusOr<cohort::RgbImage> image = cohort::DecodeJpeg(*bytes, 0, path);
    if (!image.ok()) {
      std::cerr << "transform_image: error: " << image.status().message() << "\n";
      return 1;
    }
    out.write(reinterpret_cast<const char*>(image->pixels.data()),
              static_cast<std::streamsize>(image->pixels.size()));
    return out ? 0 : 1;
  }
  cohort::ImageTransformOptions options;
  options.channels = absl::GetFlag(FLAGS_channels);
  options.train_size = options.eval_size = absl::GetFlag(FLAGS_size);
  options.eval_resize = absl::GetFlag(FLAGS_resize);
  options.mean = {0, 0, 0};
  options.std = {1.0f / 255, 1.0f / 255, 1.0f / 255};  // grey levels out
  cohort::ImageTransformer transformer(options);
  std::vector<float> sample(static_cast<size_t>(options.channels) * options.train_size *
                            options.train_size);
  absl::Status done;
  if (mode == "train") {
    absl::StatusOr<cohort::RgbImage> image = cohort::DecodeJpeg(*bytes, 0, path);
    if (!image.ok()) {
      std::cerr << "transform_image: error: " << image.status().message() << "\n";
      return 1;
    }
    const cohort::TrainDraw draw =
        cohort::DrawTrainCrop(image->width, image->height, options, absl::GetFlag(FLAGS_seed),
                              absl::GetFlag(FLAGS_epoch), absl::GetFlag(FLAGS_index));
    std::printf("box %g %g %g %g flip %d\n", draw.box.x0, draw.box.y0, draw.box.x1, draw.box.y1,
                draw.flip ? 1 : 0);
    done = transformer.Train(*bytes, absl::GetFlag(FLAGS_seed), absl::GetFlag(FLAGS_epoch),
                             absl::GetFlag(FLAGS_index), path, sample.data());
  } else if (mode == "eval") {
    done = transformer.Eval(*bytes, path, sample.data());
  } else {
    std::cerr << "transform_image: error: --mode=" << mode << ": expected decode, eval or train\n";
    return 2;
  }
  if (!done.ok()) {
    std::cerr << "transform_image: error: " << done.message() << "\n";
    return 1;
  }
  out.write(reinterpret_cast<const char*>(sample.data()),
            static_cast<std::streamsize>(sample.size() * sizeof(float)));
  return out ? 0 : 1;
}
