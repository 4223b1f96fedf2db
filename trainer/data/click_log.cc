#include "trainer/data/click_log.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "trainer/base/random.h"

namespace cohort {
namespace {

constexpr size_t kChunkBytes = 1 << 16;

// A line as messages show it: its start, cut short.
std::string Quoted(absl::string_view text) {
  constexpr size_t kShown = 24;
  return absl::StrCat("'", text.substr(0, kShown), text.size() > kShown ? "...'" : "'");
}

absl::Status ParseInteger(absl::string_view field, int column, int64_t* value) {
  const absl::string_view digits = field.front() == '-' ? field.substr(1) : field;
  const bool decimal =
      !digits.empty() && digits.find_first_not_of("0123456789") == absl::string_view::npos;
  if (decimal && absl::SimpleAtoi(field, value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("column ", ClickColumnName(column), " holds ", Quoted(field),
                   decimal ? ", beyond a 64-bit integer" : ", not an integer"));
}

absl::Status ParseCategory(absl::string_view field, int column, uint32_t* value) {
  if (field.size() > 8) {
    return absl::InvalidArgumentError(absl::StrCat("column ", ClickColumnName(column), " holds ",
                                                   Quoted(field),
                                                   ", more than 8 hexadecimal "
                                                   "digits (a category is a 32-bit value)"));
  }
  uint32_t v = 0;
  for (char c : field) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("column ", ClickColumnName(column), " holds ",
                                                     Quoted(field), ", not a hexadecimal value"));
    }
    v = (v << 4) | static_cast<uint32_t>(digit);
  }
  *value = v;
  return absl::OkStatus();
}

}  // namespace

std::string ClickColumnName(int column) {
  if (column == 0) return "label";
  if (column <= kClickIntegerFeatures) return absl::StrCat("I", column);
  return absl::StrCat("C", column - kClickIntegerFeatures);
}

absl::Status ParseClickLine(absl::string_view line, ClickRecord* record) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an empty line; a click-log line has ", kClickColumns, " tab-separated columns (label, ",
        kClickIntegerFeatures, " integers, ", kClickCategoricalFeatures, " categories)"));
  }
  ClickRecord r;
  int column = 0;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    const absl::string_view field =
        line.substr(start, tab == absl::string_view::npos ? absl::string_view::npos : tab - start);
    if (column >= kClickColumns) {
      return absl::InvalidArgumentError(absl::StrCat(
          "more than ", kClickColumns, " tab-separated columns (label, ", kClickIntegerFeatures,
          " integers, ", kClickCategoricalFeatures, " categories)"));
    }
    if (column == 0) {
      if (field != "0" && field != "1") {
        return absl::InvalidArgumentError(
            absl::StrCat("the label is ", Quoted(field), "; it must be 0 or 1"));
      }
      r.label = field == "1" ? 1 : 0;
    } else if (!field.empty()) {
      if (column <= kClickIntegerFeatures) {
        const int j = column - 1;
        if (absl::Status s = ParseInteger(field, column, &r.integers[j]); !s.ok()) return s;
        r.present |= uint64_t{1} << j;
      } else {
        const int f = column - 1 - kClickIntegerFeatures;
        if (absl::Status s = ParseCategory(field, column, &r.categories[f]); !s.ok()) return s;
        r.present |= uint64_t{1} << (kClickIntegerFeatures + f);
      }
    }
    ++column;
    if (tab == absl::string_view::npos) break;
    start = tab + 1;
  }
  if (column != kClickColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat(column, " tab-separated column", column == 1 ? "" : "s",
                     "; a click-log line has ", kClickColumns, " (label, ", kClickIntegerFeatures,
                     " integers, ", kClickCategoricalFeatures, " categories)"));
  }
  *record = r;
  return absl::OkStatus();
}

std::string FormatClickLine(const ClickRecord& record) {
  std::string line = record.label == 1 ? "1" : "0";
  for (int j = 0; j < kClickIntegerFeatures; ++j) {
    line += '\t';
    if (record.has_integer(j)) absl::StrAppend(&line, record.integers[j]);
  }
  for (int f = 0; f < kClickCategoricalFeatures; ++f) {
    line += '\t';
    if (record.has_category(f)) {
      absl::StrAppend(&line, absl::Hex(record.categories[f], absl::kZeroPad8));
    }
  }
  return line;
}

float ClickIntegerInput(int64_t value) {
  return value > 0 ? std::log1p(static_cast<float>(value)) : 0.0f;
}

uint64_t ClickFeatureId(int feature, uint32_t value) {
  // A bijection of (feature, value): no two pairs share an id.
  return MixBits((static_cast<uint64_t>(feature) << 32) | value);
}

absl::StatusOr<std::unique_ptr<ClickLogReader>> ClickLogReader::Open(const std::string& path,
                                                                     ClickLogOptions options) {
  absl::StatusOr<std::unique_ptr<GzipReader>> file = GzipReader::Open(path, "a click log");
  if (!file.ok()) return file.status();
  return std::unique_ptr<ClickLogReader>(new ClickLogReader(path, options, *std::move(file)));
}

ClickLogReader::ClickLogReader(std::string path, ClickLogOptions options,
                               std::unique_ptr<GzipReader> file)
    : path_(std::move(path)), options_(options), file_(std::move(file)), chunk_(kChunkBytes) {}

absl::StatusOr<bool> ClickLogReader::Fill() {
  absl::StatusOr<size_t> n = file_->Read(absl::MakeSpan(chunk_));
  if (!n.ok()) {
    return absl::DataLossError(absl::StrCat(n.status().message(), " after line ", lines_,
                                            "; write or copy the file again"));
  }
  chunk_begin_ = 0;
  chunk_end_ = *n;
  return *n > 0;
}

absl::StatusOr<bool> ClickLogReader::ReadLine() {
  line_.clear();
  line_too_long_ = false;
  while (true) {
    if (chunk_begin_ == chunk_end_) {
      absl::StatusOr<bool> more = Fill();
      if (!more.ok()) return more.status();
      if (!*more) {
        ended_ = true;
        // The last line ended with its newline: no line is left.
        if (line_.empty() && !line_too_long_) return false;
        break;
      }
    }
    const char* begin = chunk_.data() + chunk_begin_;
    const char* end = chunk_.data() + chunk_end_;
    const char* newline = static_cast<const char*>(std::memchr(begin, '\n', end - begin));
    const char* stop = newline != nullptr ? newline : end;
    // Past the longest line, the rest of it is read and dropped.
    const size_t take = std::min<size_t>(stop - begin, options_.max_line_bytes - line_.size());
    line_.append(begin, take);
    line_too_long_ = line_too_long_ || static_cast<size_t>(stop - begin) > take;
    chunk_begin_ = static_cast<size_t>(stop - chunk_.data()) + (newline != nullptr ? 1 : 0);
    if (newline != nullptr) break;
  }
  ++lines_;
  return true;
}

absl::StatusOr<bool> ClickLogReader::Next(ClickRecord* record) {
  while (!ended_) {
    absl::StatusOr<bool> read = ReadLine();
    if (!read.ok()) return read.status();
    if (!*read) return false;
    const absl::Status parsed =
        line_too_long_
            ? absl::InvalidArgumentError(absl::StrCat("longer than ", options_.max_line_bytes,
                                                      " bytes: not a click-log line"))
            : ParseClickLine(line_, record);
    if (parsed.ok()) return true;
    if (!options_.skip_corrupt) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, " line ", lines_, ": ", parsed.message(),
                       "; mend the file, or pass --skip_corrupt to count such lines and go on"));
    }
    ++skipped_;
  }
  return false;
}

}  // namespace cohort
