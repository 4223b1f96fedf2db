#ifndef COHORT_TRAINER_DATA_IMAGE_FOLDER_H_
#define COHORT_TRAINER_DATA_IMAGE_FOLDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// The images of a dataset folder and their labels.
struct ImageList {
  std::vector<std::string> classes;  // by label
  struct Entry {
    std::string path;  // relative to the folder
    int64_t label = 0;
  };
  std::vector<Entry> images;  // in a fixed order: by class, then by name
};

// A folder of class sub-folders of images, as torchvision's ImageFolder reads it: the classes
// are the sub-folders sorted by name (labels 0..K-1), each holding its images (.jpg, .jpeg,
// .png, .ppm, .bmp, .pgm, .tif, .tiff, .webp, any case; in nested folders too), other files
// ignored. A missing folder, one without class folders, and a class folder without images are
// each an error naming it.
absl::StatusOr<ImageList> ListImageFolder(const std::string& dir);

// An im2rec list file (.lst): a line "index<TAB>label<TAB>path" per image (im2rec's paths are
// relative to the images' root); the classes are the labels' numbers, 0 to the largest. Errors
// name the file and the line.
absl::StatusOr<ImageList> ReadImageListFile(const std::string& path);
// The same from the list's text; errors name `path`.
absl::StatusOr<ImageList> ParseImageList(absl::string_view text, absl::string_view path);

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_IMAGE_FOLDER_H_
