#ifndef COHORT_TRAINER_LOOP_TRAINING_DATA_H_
#define COHORT_TRAINER_LOOP_TRAINING_DATA_H_

#include <memory>
#include <ostream>

#include "absl/status/statusor.h"
#include "trainer/data/sample_source.h"
#include "trainer/data/sampler.h"
#include "trainer/loop/training.h"

namespace cohort {

// The splits a process trains and evaluates on, as the model takes them.
struct TrainingData {
  std::unique_ptr<SampleSource> train;
  std::unique_ptr<SampleSource> test;
  DataPartition partition;  // of train: which samples each rank reads
};

// Opens the data the options name. A dataset held in memory (IDX, CIFAR-10, synthetic) is
// zero-padded up to the model's designed image size where it is smaller (said on out when
// lead), normalised by its training split's statistics and augmented as --augment says.
// Encoded images (imagefolder:, recordio:, tfrecord:) are decoded batch by batch at
// --image_size, normalised by --mean/--std, with --augment=crop_flip meaning
// RandomResizedCrop + flip; skipped damaged samples are said on out. --data_partition=files
// splits record files between the ranks (a host may then hold only its ranks' .rec files).
absl::StatusOr<TrainingData> OpenTrainingData(const TrainOptions& options, bool lead,
                                              std::ostream& out);

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_TRAINING_DATA_H_
