#ifndef COHORT_TRAINER_DATA_RECORD_PACKER_H_
#define COHORT_TRAINER_DATA_RECORD_PACKER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/image_folder.h"

namespace cohort {

enum class RecordFormat { kRecordIO, kTFRecord };

struct PackOptions {
  std::string root;    // the folder the list's paths are relative to
  // RecordIO shards are PREFIX-00000.rec with PREFIX-00000.idx, ...; TFRecord shards
  // PREFIX-00000.tfrecord, ... (the folder is made).
  std::string prefix;
  RecordFormat format = RecordFormat::kRecordIO;
  int64_t shard_bytes = int64_t{256} << 20;  // a shard ends once it holds at least this
  uint64_t seed = 0;   // the records' order: the same seed, the same files, byte for byte
  bool shuffle = true;  // false: the list's order (im2rec's --no-shuffle)
  // TFRecord: the label stored for class 0 (TensorFlow's ImageNet files: 1).
  int64_t label_base = 1;
};

// Packs the listed images (their files' bytes, as they are) into record shards, in an order
// shuffled by the seed: RecordIO as im2rec writes it (an image record each: the label, the id =
// the image's place in the list; an .idx per shard), so that MXNet reads them too, or TFRecord
// files of tf.train.Example records as TensorFlow's ImageNet script writes them
// ("image/encoded", "image/class/label"). Says its progress (images/s, ETA) on `progress`
// every `every` images. Returns the shards' paths (.rec or .tfrecord).
absl::StatusOr<std::vector<std::string>> PackRecords(const ImageList& list,
                                                     const PackOptions& options,
                                                     std::ostream& progress,
                                                     int64_t every = 1000);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_RECORD_PACKER_H_
