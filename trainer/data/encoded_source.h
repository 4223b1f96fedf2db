#ifndef COHORT_TRAINER_DATA_ENCODED_SOURCE_H_
#define COHORT_TRAINER_DATA_ENCODED_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "trainer/base/thread_team.h"
#include "trainer/data/encoded_images.h"
#include "trainer/data/image_transform.h"
#include "trainer/data/sample_source.h"

namespace cohort {

struct EncodedSourceOptions {
  ImageTransformOptions transform;
  bool train = true;  // whose geometry sample_shape() says: every Gather of this split uses it
  int threads = 1;    // decoding threads
  // A sample that cannot be read or decoded is skipped (replaced by the next one that can be,
  // its place and draw kept) and counted, instead of failing the batch.
  bool skip_corrupt = false;
  int64_t limit = 0;  // only the first N images (0: all)
};

// Encoded images (JPEGs) decoded, cropped, resized, flipped and normalised batch by batch on a
// team of threads, each sample a function of (seed, epoch, index) alone (image_transform.h).
class EncodedSource final : public SampleSource {
 public:
  // Skipped samples are said on log (the first ten, then every power of ten).
  EncodedSource(std::unique_ptr<EncodedImages> images, const EncodedSourceOptions& options,
                std::ostream* log);

  std::string name() const override { return images_->name(); }
  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return sample_shape_; }
  int num_classes() const override { return images_->num_classes(); }
  ChannelNormalization normalization() const override;

  absl::Status Gather(absl::Span<const int64_t> indices, const EpochKeys* train, Tensor* images,
                      Tensor* labels) override;

  int64_t skipped() const override { return skipped_.load(); }

 private:
  // One sample into dst (C, H, W) and its label.
  absl::Status Sample(int member, int64_t index, const EpochKeys* train, float* dst,
                      int32_t* label);
  absl::Status Decode(int member, int64_t stored, int64_t index, const EpochKeys* train,
                      float* dst, int32_t* label);
  void SaySkipped(const absl::Status& why);

  const std::unique_ptr<EncodedImages> images_;
  const EncodedSourceOptions options_;
  const int64_t size_;
  const Shape sample_shape_;
  std::ostream* const log_;

  struct Member {
    explicit Member(const ImageTransformOptions& options) : transformer(options) {}
    ImageTransformer transformer;
    std::string bytes;
  };
  std::vector<std::unique_ptr<Member>> members_;  // one per team thread
  ThreadTeam team_;

  std::atomic<int64_t> skipped_{0};
  absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // the batch's first error
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_ENCODED_SOURCE_H_
