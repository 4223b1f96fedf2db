#ifndef COHORT_TRAINER_DATA_RECORD_PACKER_H_
#define COHORT_TRAINER_DATA_RECORD_PACKER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/image_folder.h"

namespace cohort {

struct PackOptions {
  std::string root;    // the folder the list's paths are relative to
  std::string prefix;  // shards are PREFIX-00000.rec with PREFIX-00000.idx, ... (folder made)
  int64_t shard_bytes = int64_t{256} << 20;  // a shard ends once it holds at least this
  uint64_t seed = 0;   // the records' order: the same seed, the same files, byte for byte
};

// Packs the listed images (their files' bytes, as they are) into RecordIO shards as im2rec
// writes them (an image record a file: the label, the id = the image's place in the list; an
// .idx per shard), in an order shuffled by the seed, so that MXNet reads them too. Says its
// progress (images/s, ETA) on `progress` every `every` images. Returns the shards' .rec paths.
absl::StatusOr<std::vector<std::string>> PackRecordIO(const ImageList& list,
                                                      const PackOptions& options,
                                                      std::ostream& progress,
                                                      int64_t every = 1000);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_RECORD_PACKER_H_
