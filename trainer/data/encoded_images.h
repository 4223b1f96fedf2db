#ifndef COHORT_TRAINER_DATA_ENCODED_IMAGES_H_
#define COHORT_TRAINER_DATA_ENCODED_IMAGES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// One split of a dataset of encoded images (JPEGs) with their labels, read one image at a time
// from wherever they are stored: the same interface for an image folder, RecordIO and TFRecord.
class EncodedImages {
 public:
  virtual ~EncodedImages() = default;

  // What was opened, e.g. "recordio:/data/imagenet/train (4 files)".
  virtual std::string name() const = 0;
  virtual int64_t size() const = 0;
  virtual int num_classes() const = 0;

  // Image `index` (in [0, size())): its encoded bytes, copied into *bytes, and its label. Safe to
  // call from many threads at once. A damaged record, a label out of [0, num_classes()) or an
  // unreadable file is an error naming Where(index) and what is wrong.
  virtual absl::StatusOr<int64_t> Read(int64_t index, std::string* bytes) const = 0;

  // Where image `index` is stored, for messages: "FILE" or "FILE at byte offset N".
  virtual std::string Where(int64_t index) const = 0;

  // The images of each record file, in index order (file 0's first): what a partition by files
  // splits. Empty for an image folder.
  virtual std::vector<int64_t> RecordsPerFile() const { return {}; }
};

struct EncodedImagesOptions {
  // TFRecord labels are the stored ones less this: TensorFlow's ImageNet files number their
  // classes from 1 (0 was "background"), files that count from 0 need 0.
  int64_t label_base = 1;
  // Classes in the dataset; 0: found at open. That reads every label: the folder's class folders,
  // each RecordIO record's header (a page of each), every TFRecord's whole Example. Give it for a
  // large TFRecord dataset.
  int num_classes = 0;
  // RecordIO: a .rec missing beside its .idx is counted from the index and not read (a host
  // that holds only its own ranks' files; num_classes must then be given). Otherwise an error.
  bool rec_may_be_absent = false;
};

// Opens a split named as --dataset names it:
//   imagefolder:DIR     a folder of class folders of images (torchvision's ImageFolder), or an
//                       im2rec list file (.lst: "index<TAB>label<TAB>path", paths relative to the
//                       list's folder)
//   recordio:PREFIX     im2rec's PREFIX.rec with PREFIX.idx, or the shards PREFIX-NNNNN.idx with
//                       their .rec (//tools/data:pack_records writes those)
//   tfrecord:GLOB       the files GLOB matches (a '*' and '?' in the last path component), in
//                       name order, of tf.train.Example records with "image/encoded" and
//                       "image/class/label"
// A name of another kind is InvalidArgument; no files is NotFound, naming where it looked.
absl::StatusOr<std::unique_ptr<EncodedImages>> OpenEncodedImages(
    absl::string_view spec, const EncodedImagesOptions& options);

// Whether a --dataset name is one OpenEncodedImages opens (by its "kind:" prefix).
bool IsEncodedImagesSpec(absl::string_view spec);

// A --dataset name split at its kind: {"recordio:", "/data/train"}; the kind is empty for a name
// that is not one of encoded images.
struct EncodedImagesSpec {
  std::string kind;
  std::string path;
};
EncodedImagesSpec ParseEncodedImagesSpec(absl::string_view spec);

// The regular files a pattern matches ('*' and '?' in the last path component), in name order.
std::vector<std::string> MatchingFiles(const std::string& pattern);

// The index files of recordio:PREFIX, each with its .rec beside it: PREFIX.idx, or else the
// shards' PREFIX-NNNNN.idx in order. Empty when there are none.
std::vector<std::string> RecordIOIndexFiles(const std::string& prefix);

// The two splits a job reads, as OpenEncodedImages specs.
struct DatasetSplits {
  std::string train;
  std::string eval;
};

// The splits of --dataset, and of --eval_dataset when it is not empty. Without it the evaluation
// split is found beside the training one: an image folder holding train/ and val/ (ImageNet's
// layout) gives those; otherwise the spec's last "train" made "val" or "validation", whichever
// exists (im2rec's and TensorFlow's names). NotFound when there is none, saying what was tried.
absl::StatusOr<DatasetSplits> ResolveSplits(absl::string_view dataset,
                                            absl::string_view eval_dataset);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_ENCODED_IMAGES_H_
