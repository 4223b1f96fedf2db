#include "trainer/data/encoded_images.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "trainer/io/whole_file.h"
#include "trainer/base/status_macros.h"
#include "trainer/data/image_folder.h"
#include "trainer/data/recordio.h"
#include "trainer/data/tfrecord.h"
#include "trainer/io/mapped_file.h"

namespace cohort {
namespace {

constexpr absl::string_view kFolder = "imagefolder:";
constexpr absl::string_view kRecordIO = "recordio:";
constexpr absl::string_view kTFRecord = "tfrecord:";

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::vector<std::string> MatchingFiles(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> paths;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (IsFile(g.gl_pathv[i])) paths.emplace_back(g.gl_pathv[i]);
    }
  }
  globfree(&g);
  std::sort(paths.begin(), paths.end());
  return paths;
}

namespace {

// A label as a record stores it, checked against the classes there are.
absl::Status CheckLabel(int64_t label, int num_classes, const std::string& where) {
  if (label < 0 || label >= num_classes) {
    return absl::DataLossError(absl::StrFormat(
        "%s: label %d is outside the dataset's %d classes [0, %d): a damaged record, or give "
        "the number of classes the files hold",
        where, label, num_classes, num_classes));
  }
  return absl::OkStatus();
}

absl::Status NoClasses(const std::string& name) {
  return absl::InvalidArgumentError(absl::StrCat(name, " holds no image"));
}

// An image folder or an im2rec list: one file per image.
class FolderImages final : public EncodedImages {
 public:
  FolderImages(std::string name, std::string root, ImageList list)
      : name_(std::move(name)), root_(std::move(root)), list_(std::move(list)) {}

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(list_.images.size()); }
  int num_classes() const override { return static_cast<int>(list_.classes.size()); }

  absl::StatusOr<int64_t> Read(int64_t index, std::string* bytes) const override {
    const ImageList::Entry& entry = list_.images[static_cast<size_t>(index)];
    absl::StatusOr<std::string> read = ReadWholeFile(Where(index));
    if (!read.ok()) {
      return absl::DataLossError(absl::StrCat(Where(index), ": cannot be read (",
                                              read.status().message(), ")"));
    }
    *bytes = *std::move(read);
    return entry.label;
  }

  std::string Where(int64_t index) const override {
    return absl::StrCat(root_, "/", list_.images[static_cast<size_t>(index)].path);
  }

 private:
  const std::string name_;
  const std::string root_;
  const ImageList list_;
};

// Records at known offsets of mapped files, in the order of the files and, within one, of
// the offsets. A file may be absent: its records are counted, not read.
class RecordFiles {
 public:
  struct Record {
    int32_t file;
    int64_t offset;
  };

  absl::Status Add(const std::string& path) {
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
    paths_.push_back(path);
    files_.push_back(std::move(file));
    return absl::OkStatus();
  }
  void AddAbsent(const std::string& path) {
    paths_.push_back(path);
    files_.push_back(nullptr);
  }
  int32_t last() const { return static_cast<int32_t>(files_.size()) - 1; }
  // Null when absent.
  const MappedFile* file(int32_t f) const { return files_[static_cast<size_t>(f)].get(); }
  const std::string& path(int32_t f) const { return paths_[static_cast<size_t>(f)]; }

  void AddRecord(int64_t offset) {
    records_.push_back({last(), offset});
    if (counts_.size() < files_.size()) counts_.resize(files_.size(), 0);
    ++counts_.back();
  }
  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  const Record& record(int64_t index) const { return records_[static_cast<size_t>(index)]; }
  std::vector<int64_t> counts() const {
    std::vector<int64_t> counts = counts_;
    counts.resize(files_.size(), 0);
    return counts;
  }

  std::string Where(int64_t index) const {
    const Record& r = record(index);
    return absl::StrCat(path(r.file), " at byte offset ", r.offset);
  }

  // The bytes of the file holding record `index`; an error when it is absent.
  absl::StatusOr<absl::Span<const uint8_t>> BytesOf(int64_t index) const {
    const MappedFile* f = file(record(index).file);
    if (f == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          Where(index), ": this host does not hold ", path(record(index).file),
          " (only its .idx): it belongs to another rank's share of the files"));
    }
    return f->bytes();
  }

 private:
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<Record> records_;
  std::vector<int64_t> counts_;
};

// Images in record files: what RecordIO and TFRecord share once their records are listed.
class RecordImages : public EncodedImages {
 public:
  std::string name() const override { return name_; }
  int64_t size() const override { return files_.size(); }
  int num_classes() const override { return num_classes_; }

  absl::StatusOr<int64_t> Read(int64_t index, std::string* bytes) const override {
    ASSIGN_OR_RETURN(const int64_t label, ReadLabel(index, bytes));
    RETURN_IF_ERROR(CheckLabel(label, num_classes_, Where(index)));
    return label;
  }

  std::string Where(int64_t index) const override { return files_.Where(index); }
  std::vector<int64_t> RecordsPerFile() const override { return files_.counts(); }

 protected:
  // The record's label, and its image when bytes is not null.
  virtual absl::StatusOr<int64_t> ReadLabel(int64_t index, std::string* bytes) const = 0;

  // Once every file is listed: the name ("recordio:PREFIX (N files)") and the classes, given
  // or one past the largest label read.
  absl::Status Listed(absl::string_view spec, int files, const EncodedImagesOptions& options,
                      int64_t max_label) {
    if (files_.size() == 0) return NoClasses(std::string(spec));
    num_classes_ = options.num_classes > 0 ? options.num_classes : static_cast<int>(max_label + 1);
    name_ = absl::StrFormat("%s (%d file%s)", spec, files, files == 1 ? "" : "s");
    return absl::OkStatus();
  }

  RecordFiles files_;

 private:
  std::string name_;
  int num_classes_ = 0;
};

class RecordIOImages final : public RecordImages {
 public:
  static absl::StatusOr<std::unique_ptr<EncodedImages>> Open(const std::string& prefix,
                                                           const EncodedImagesOptions& options) {
    // Found by their indexes: a host may hold only some of the .rec files.
    const std::vector<std::string> idxs = RecordIOIndexFiles(prefix);
    if (idxs.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "recordio:", prefix, ": neither ", prefix, ".idx nor ", prefix,
          "-00000.idx, ... exists (im2rec writes PREFIX.rec with PREFIX.idx, "
          "//tools/data:pack_records PREFIX-NNNNN.rec with .idx)"));
    }
    auto images = std::unique_ptr<RecordIOImages>(new RecordIOImages);
    int64_t max_label = -1;
    bool absent = false;
    for (const std::string& idx_path : idxs) {
      const std::string rec = idx_path.substr(0, idx_path.size() - 4) + ".rec";
      if (IsFile(rec) || !options.rec_may_be_absent) {
        RETURN_IF_ERROR(images->files_.Add(rec));
      } else {
        images->files_.AddAbsent(rec);
        absent = true;
      }
      absl::StatusOr<std::string> idx = ReadWholeFile(idx_path);
      if (!idx.ok()) {
        return absl::NotFoundError(absl::StrCat("recordio: cannot read the index ", idx_path));
      }
      const MappedFile* file = images->files_.file(images->files_.last());
      ASSIGN_OR_RETURN(
          auto entries,
          ParseRecordIOIndex(*idx,
                             file != nullptr ? static_cast<int64_t>(file->bytes().size())
                                             : std::numeric_limits<int64_t>::max(),
                             idx_path));
      // In file order: nearby records are read together.
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.second < b.second; });
      for (const auto& [id, offset] : entries) {
        images->files_.AddRecord(offset);
        if (options.num_classes == 0 && file != nullptr) {
          ASSIGN_OR_RETURN(const int64_t label, images->PeekLabel(images->files_.size() - 1));
          max_label = std::max(max_label, label);
        }
      }
    }
    if (absent && options.num_classes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "recordio:", prefix, ": some .rec files are not on this host, so their labels "
          "cannot be counted: give --num_classes"));
    }
    RETURN_IF_ERROR(images->Listed(absl::StrCat("recordio:", prefix),
                                   static_cast<int>(idxs.size()), options, max_label));
    return std::unique_ptr<EncodedImages>(std::move(images));
  }

 private:
  RecordIOImages() = default;

  // The record's first label, as a whole number.
  absl::StatusOr<int64_t> ReadLabel(int64_t index, std::string* bytes) const override {
    const RecordFiles::Record& r = files_.record(index);
    ASSIGN_OR_RETURN(const absl::Span<const uint8_t> file, files_.BytesOf(index));
    ASSIGN_OR_RETURN(RecordIORecord record, ReadRecordIO(file, r.offset, files_.path(r.file)));
    ASSIGN_OR_RETURN(ImageRecord image, DecodeImageRecord(record.payload, Where(index)));
    ASSIGN_OR_RETURN(const int64_t label,
                     ClassOf(image.labels.empty() ? -1.0f : image.labels[0], index));
    if (bytes != nullptr) *bytes = std::move(image.image);
    return label;
  }

  // The label from the record's first bytes only (a page, not the image), where its header lies
  // whole in its first part; ReadLabel otherwise.
  absl::StatusOr<int64_t> PeekLabel(int64_t index) const {
    const RecordFiles::Record& r = files_.record(index);
    const absl::Span<const uint8_t> file = files_.file(r.file)->bytes();
    uint32_t head[2], flag = 0;
    if (r.offset + 8 + 28 > static_cast<int64_t>(file.size())) return ReadLabel(index, nullptr);
    std::memcpy(head, file.data() + r.offset, sizeof(head));
    const uint32_t cflag = head[1] >> 29, length = head[1] & ((1u << 29) - 1);
    if (head[0] != kRecordIOMagic || cflag > 1 || length < 28) return ReadLabel(index, nullptr);
    const uint8_t* payload = file.data() + r.offset + 8;
    std::memcpy(&flag, payload, 4);
    float label = 0;
    std::memcpy(&label, payload + (flag == 0 ? 4 : 24), 4);
    return ClassOf(label, index);
  }

  absl::StatusOr<int64_t> ClassOf(float label, int64_t index) const {
    if (!(label >= 0) || label != std::floor(label) || label > (1 << 30)) {
      return absl::DataLossError(absl::StrFormat(
          "%s: label %g is not a class number (a whole number from 0)", Where(index), label));
    }
    return static_cast<int64_t>(label);
  }
};

class TFRecordImages final : public RecordImages {
 public:
  static absl::StatusOr<std::unique_ptr<EncodedImages>> Open(const std::string& pattern,
                                                           const EncodedImagesOptions& options) {
    const std::vector<std::string> paths = MatchingFiles(pattern);
    if (paths.empty()) {
      return absl::NotFoundError(
          absl::StrCat("tfrecord:", pattern, ": no file matches ", pattern));
    }
    auto images = std::unique_ptr<TFRecordImages>(new TFRecordImages(options.label_base));
    int64_t max_label = -1;
    for (const std::string& path : paths) {
      RETURN_IF_ERROR(images->files_.Add(path));
      const absl::Span<const uint8_t> bytes = images->files_.file(images->files_.last())->bytes();
      for (int64_t offset = 0; offset < static_cast<int64_t>(bytes.size());) {
        images->files_.AddRecord(offset);
        if (options.num_classes == 0) {
          ASSIGN_OR_RETURN(const int64_t label,
                           images->ReadLabel(images->files_.size() - 1, nullptr));
          max_label = std::max(max_label, label);
        }
        ASSIGN_OR_RETURN(offset, NextTFRecord(bytes, offset, path));
      }
    }
    RETURN_IF_ERROR(images->Listed(absl::StrCat("tfrecord:", pattern),
                                   static_cast<int>(paths.size()), options, max_label));
    return std::unique_ptr<EncodedImages>(std::move(images));
  }

 private:
  explicit TFRecordImages(int64_t label_base) : label_base_(label_base) {}

  absl::StatusOr<int64_t> ReadLabel(int64_t index, std::string* bytes) const override {
    const RecordFiles::Record& r = files_.record(index);
    const MappedFile& file = *files_.file(r.file);
    ASSIGN_OR_RETURN(TFRecord record, ReadTFRecord(file.bytes(), r.offset, file.path()));
    ASSIGN_OR_RETURN(ImageExample example,
                     DecodeImageExample(record.payload, label_base_, Where(index)));
    if (bytes != nullptr) *bytes = std::move(example.image);
    return example.label;
  }

  const int64_t label_base_;
};

absl::StatusOr<std::unique_ptr<EncodedImages>> OpenFolder(const std::string& path) {
  std::string root = path;
  ImageList list;
  if (absl::EndsWith(path, ".lst") && IsFile(path)) {
    ASSIGN_OR_RETURN(list, ReadImageListFile(path));
    const size_t slash = path.rfind('/');
    root = slash == std::string::npos ? "." : path.substr(0, slash);
  } else {
    ASSIGN_OR_RETURN(list, ListImageFolder(path));
  }
  const std::string name = absl::StrFormat("imagefolder:%s (%d classes)", path,
                                           list.classes.size());
  return std::unique_ptr<EncodedImages>(new FolderImages(name, root, std::move(list)));
}

// Whether a split's files are there.
bool SplitExists(absl::string_view kind, const std::string& path) {
  if (kind == kFolder) return IsDirectory(path) || (absl::EndsWith(path, ".lst") && IsFile(path));
  if (kind == kRecordIO) return !RecordIOIndexFiles(path).empty();
  return !MatchingFiles(path).empty();
}

}  // namespace

EncodedImagesSpec ParseEncodedImagesSpec(absl::string_view spec) {
  for (const absl::string_view kind : {kFolder, kRecordIO, kTFRecord}) {
    if (absl::StartsWith(spec, kind)) {
      return {std::string(kind), std::string(spec.substr(kind.size()))};
    }
  }
  return {"", std::string(spec)};
}

std::vector<std::string> RecordIOIndexFiles(const std::string& prefix) {
  if (IsFile(prefix + ".idx")) return {prefix + ".idx"};
  return MatchingFiles(prefix + "-[0-9][0-9][0-9][0-9][0-9].idx");
}

bool IsEncodedImagesSpec(absl::string_view spec) {
  return !ParseEncodedImagesSpec(spec).kind.empty();
}

absl::StatusOr<std::unique_ptr<EncodedImages>> OpenEncodedImages(
    absl::string_view spec, const EncodedImagesOptions& options) {
  const auto [kind, path] = ParseEncodedImagesSpec(spec);
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--dataset=", spec, " names no path"));
  }
  if (kind == kFolder) return OpenFolder(path);
  if (kind == kRecordIO) return RecordIOImages::Open(path, options);
  if (kind == kTFRecord) return TFRecordImages::Open(path, options);
  return absl::InvalidArgumentError(absl::StrCat(
      "--dataset=", spec, ": not a dataset of encoded images (imagefolder:DIR, recordio:PREFIX, "
      "tfrecord:GLOB)"));
}

absl::StatusOr<DatasetSplits> ResolveSplits(absl::string_view dataset,
                                            absl::string_view eval_dataset) {
  const auto [kind, path] = ParseEncodedImagesSpec(dataset);
  if (kind.empty()) return OpenEncodedImages(dataset, {}).status();
  if (!SplitExists(kind, path)) {
    return absl::NotFoundError(absl::StrCat("--dataset=", dataset, ": ", path, " is not there"));
  }
  if (!eval_dataset.empty()) return DatasetSplits{std::string(dataset), std::string(eval_dataset)};
  const std::string base = std::string(absl::StripSuffix(path, "/"));
  std::vector<std::string> tried;
  if (kind == kFolder && IsDirectory(base + "/train")) {
    for (const char* val : {"/val", "/validation"}) {
      if (IsDirectory(base + val)) {
        return DatasetSplits{absl::StrCat(kind, base, "/train"), absl::StrCat(kind, base, val)};
      }
      tried.push_back(base + val);
    }
  }
  if (const size_t at = base.rfind("train"); at != std::string::npos) {
    for (const char* val : {"val", "validation"}) {
      std::string eval = base;
      eval.replace(at, 5, val);
      if (SplitExists(kind, eval)) return DatasetSplits{std::string(dataset), absl::StrCat(kind, eval)};
      tried.push_back(eval);
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "--dataset=", dataset, ": no evaluation split beside it",
      tried.empty() ? " (its path has no \"train\" to make \"val\")"
                    : absl::StrCat(" (tried ", absl::StrJoin(tried, ", "), ")"),
      ": name it with --eval_dataset"));
}

}  // namespace cohort
