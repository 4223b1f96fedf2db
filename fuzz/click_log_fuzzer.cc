// Click logs: the input as lines of Criteo's format, each parsed, and the whole read by the
// reader as a file (plain or gzip), skipping what is malformed.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "trainer/data/click_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  cohort::ClickRecord record;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    cohort::ParseClickLine(line, &record).IgnoreError();
  }
  static const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR") != nullptr ? std::getenv("TEST_TMPDIR") : "/tmp",
                   "/click_log_fuzzer.", getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  absl::StatusOr<std::unique_ptr<cohort::ClickLogReader>> reader =
      cohort::ClickLogReader::Open(path, {.skip_corrupt = true, .max_line_bytes = 4096});
  if (reader.ok()) {
    int64_t records = 0;
    while (true) {
      absl::StatusOr<bool> more = (*reader)->Next(&record);
      if (!more.ok() || !*more) break;
      ++records;
    }
    // Every line read is a record or a skip, never more.
    if (records + (*reader)->skipped() != (*reader)->lines()) __builtin_trap();
  }
  std::remove(path.c_str());
  return 0;
}
