#include "trainer/data/image_folder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "trainer/io/whole_file.h"

namespace cohort {

namespace {

namespace fs = std::filesystem;

// Labels a list may use: far more classes than any dataset has, far fewer than would exhaust
// memory naming them.
constexpr int64_t kMaxListClasses = int64_t{1} << 20;

bool IsImageFile(const fs::path& path) {
  static const char* const kExtensions[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                            ".pgm", ".tif", ".tiff", ".webp"};
  const std::string extension = absl::AsciiStrToLower(path.extension().string());
  return std::find(std::begin(kExtensions), std::end(kExtensions), extension) !=
         std::end(kExtensions);
}

}  // namespace

absl::StatusOr<ImageList> ListImageFolder(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat(
        "image folder ", dir, ": no such folder (give the folder that holds one folder per class)"));
  }
  ImageList list;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory(error)) list.classes.push_back(entry.path().filename().string());
  }
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("image folder ", dir, ": ", error.message()));
  }
  if (list.classes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image folder ", dir, " holds no class folder: put each class's images in a folder of "
        "its own (DIR/CLASS/IMAGE.jpg)"));
  }
  std::sort(list.classes.begin(), list.classes.end());
  for (size_t label = 0; label < list.classes.size(); ++label) {
    const fs::path class_dir = fs::path(dir) / list.classes[label];
    std::vector<std::string> names;
    for (auto it = fs::recursive_directory_iterator(
             class_dir, fs::directory_options::follow_directory_symlink, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (it->is_regular_file(error) && IsImageFile(it->path())) {
        names.push_back(fs::relative(it->path(), dir).string());
      }
    }
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("image folder ", class_dir.string(), ": ", error.message()));
    }
    if (names.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "class folder ", class_dir.string(), " holds no image (.jpg, .jpeg, .png, ...): remove "
          "it, or put its images there"));
    }
    std::sort(names.begin(), names.end());
    for (std::string& name : names) {
      list.images.push_back({std::move(name), static_cast<int64_t>(label)});
    }
  }
  return list;
}

absl::StatusOr<ImageList> ReadImageListFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("list file ", path, ": cannot be read"));
  return ParseImageList(*text, path);
}

absl::StatusOr<ImageList> ParseImageList(absl::string_view text, absl::string_view path) {
  ImageList list;
  int64_t classes = 0;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    double label = 0;
    int64_t index = 0;
    if (fields.size() < 3 || !absl::SimpleAtoi(fields[0], &index) ||
        !absl::SimpleAtod(fields[1], &label) || label < 0 || label != std::floor(label) ||
        fields.back().empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: expected 'index<TAB>label<TAB>path' with a whole label from 0, as im2rec "
          "writes .lst files",
          path, line_number));
    }
    if (label >= kMaxListClasses) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: label %g: a list of more than %d classes? (a damaged line)", path, line_number,
          label, kMaxListClasses));
    }
    list.images.push_back({std::string(fields.back()), static_cast<int64_t>(label)});
    classes = std::max(classes, static_cast<int64_t>(label) + 1);
  }
  if (list.images.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("list file ", path, " names no image"));
  }
  for (int64_t c = 0; c < classes; ++c) list.classes.push_back(absl::StrCat(c));
  return list;
}

}  // namespace cohort
