// im2rec's list files (.lst): any text.

#include <cstdint>

#include "absl/strings/string_view.h"
#include "trainer/data/image_folder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<cohort::ImageList> list = cohort::ParseImageList(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz input");
  if (list.ok()) {
    for (const cohort::ImageList::Entry& entry : list->images) {
      // Every label names one of the classes the list says it has.
      if (entry.label < 0 || entry.label >= static_cast<int64_t>(list->classes.size())) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
