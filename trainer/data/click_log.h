#ifndef COHORT_TRAINER_DATA_CLICK_LOG_H_
#define COHORT_TRAINER_DATA_CLICK_LOG_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/io/gzip_reader.h"

namespace cohort {

// Criteo's click-log text format (the Kaggle display-advertising challenge's, and the 1 TB
// log's): one impression a line, tab-separated: the label (1 clicked, 0 not), 13 integer
// features (counts; Criteo's second one goes negative) and 26 categorical features (32-bit
// values written as hexadecimal, 8 digits in Criteo's files). Any feature may be missing (an
// empty column).
inline constexpr int kClickIntegerFeatures = 13;
inline constexpr int kClickCategoricalFeatures = 26;
inline constexpr int kClickColumns = 1 + kClickIntegerFeatures + kClickCategoricalFeatures;

// One line as written: a missing feature holds 0 (what the DLRM reference reads it as) and has
// its bit clear in `present` (integer feature j: bit j; categorical feature f: bit 13 + f).
struct ClickRecord {
  int32_t label = 0;
  std::array<int64_t, kClickIntegerFeatures> integers{};
  std::array<uint32_t, kClickCategoricalFeatures> categories{};
  uint64_t present = 0;

  bool has_integer(int j) const { return (present >> j) & 1; }
  bool has_category(int f) const { return (present >> (kClickIntegerFeatures + f)) & 1; }
};

// The column's name in messages: "label", "I1".."I13", "C1".."C26" (as Criteo's README).
std::string ClickColumnName(int column);

// Parses one line (without its newline; a trailing '\r' is allowed). A refusal says which
// column and why: the wrong number of columns, a label other than 0 or 1, an integer that is
// not one or overflows 64 bits, a category that is not 1 to 8 hexadecimal digits.
absl::Status ParseClickLine(absl::string_view line, ClickRecord* record);

// The record as a line of the format (without its newline): ParseClickLine gives it back.
// Categories are written as Criteo writes them, 8 lowercase hexadecimal digits.
std::string FormatClickLine(const ClickRecord& record);

// The DLRM reference's dense input of an integer feature: log(1 + x), negative counts as 0.
float ClickIntegerInput(int64_t value);

// A categorical value as a 64-bit id of its own feature: the same value in two features gives
// two ids (a table keyed by id holds each feature's values apart), spread over all 64 bits
// (a fixed table takes it modulo its rows). A missing value is value 0, as the reference reads it.
uint64_t ClickFeatureId(int feature, uint32_t value);

struct ClickLogOptions {
  // A malformed line is counted (skipped()) and passed over instead of ending the read.
  bool skip_corrupt = false;
  // The longest line read (a longer one is malformed): memory stays bounded on any input.
  size_t max_line_bytes = 1 << 16;
};

// Reads a click log line by line, plain or gzip (told apart by its first bytes), holding one
// chunk of it and one line at a time, whatever the file's size.
class ClickLogReader {
 public:
  static absl::StatusOr<std::unique_ptr<ClickLogReader>> Open(const std::string& path,
                                                              ClickLogOptions options = {});
  ClickLogReader(const ClickLogReader&) = delete;
  ClickLogReader& operator=(const ClickLogReader&) = delete;

  // The next record into *record: true, or false once the file has ended. A malformed line
  // is InvalidArgument naming the file, the line's number and the column (unless
  // skip_corrupt); a truncated or corrupt gzip stream, or a read that fails, is DataLoss.
  absl::StatusOr<bool> Next(ClickRecord* record);
  // Lines read so far (the number of the last one), and those skipped as malformed.
  int64_t lines() const { return lines_; }
  int64_t skipped() const { return skipped_; }

 private:
  ClickLogReader(std::string path, ClickLogOptions options, std::unique_ptr<GzipReader> file);
  // The next line into line_ (without its newline): true, or false at the end of the file.
  absl::StatusOr<bool> ReadLine();
  // Refills chunk_ from the file; false at its end.
  absl::StatusOr<bool> Fill();

  const std::string path_;
  const ClickLogOptions options_;
  const std::unique_ptr<GzipReader> file_;
  std::vector<char> chunk_;
  size_t chunk_begin_ = 0, chunk_end_ = 0;
  bool ended_ = false;
  std::string line_;  // at most max_line_bytes of it
  bool line_too_long_ = false;
  int64_t lines_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_DATA_CLICK_LOG_H_
