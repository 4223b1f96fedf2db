// Writes click logs in Criteo's format with a model planted in them (planted_clicks.h), and
// says how well that model itself predicts their labels: the AUC a trainer can reach.
//   bazel run //tools/data:click_log_gen -- --lines=1000000 --output=DIR/train.txt.gz \
//       --eval_lines=100000 --eval_output=DIR/eval.txt.gz
// A name ending in .gz is written gzip-compressed.
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/data/planted_clicks.h"
#include "trainer/cli/args.h"
#include "trainer/data/click_log.h"
#include "trainer/eval/binary_metrics.h"

ABSL_FLAG(int64_t, lines, 1000000, "training lines to write");
ABSL_FLAG(std::string, output, "", "the training log (.gz: compressed)");
ABSL_FLAG(int64_t, eval_lines, 0, "evaluation lines to write after them (0: none)");
ABSL_FLAG(std::string, eval_output, "", "the evaluation log (.gz: compressed)");
ABSL_FLAG(uint64_t, seed, 1, "the planted model and the lines drawn");
ABSL_FLAG(int64_t, vocabulary, 100000, "values of each categorical feature");
ABSL_FLAG(int64_t, head, 1000, "of them, the most frequent that the planted model weighs");
ABSL_FLAG(double, zipf, 1.05, "the exponent of the values' Zipf distribution");

namespace cohort {
namespace {

// Writes `lines` lines of the sequence to path; says how the planted model does on them.
absl::Status WriteLog(PlantedClicks& clicks, int64_t lines, const std::string& path) {
  gzFile file = gzopen(path.c_str(), absl::EndsWith(path, ".gz") ? "wb6" : "wbT");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  std::vector<float> probabilities;
  std::vector<int32_t> labels;
  probabilities.reserve(lines);
  labels.reserve(lines);
  std::string text;
  bool written = true;
  for (int64_t i = 0; i < lines && written; ++i) {
    float p;
    const ClickRecord r = clicks.Next(&p);
    probabilities.push_back(p);
    labels.push_back(r.label);
    absl::StrAppend(&text, FormatClickLine(r), "\n");
    if (text.size() >= (1 << 20) || i + 1 == lines) {
      written = gzwrite(file, text.data(), static_cast<unsigned>(text.size())) ==
                static_cast<int>(text.size());
      text.clear();
    }
  }
  written = gzclose(file) == Z_OK && written;
  if (!written) return absl::DataLossError(absl::StrCat("writing ", path, " failed (disk full?)"));
  int64_t clicked = 0;
  for (int32_t label : labels) clicked += label;
  absl::StatusOr<double> auc = RocAuc(probabilities, labels);
  absl::StatusOr<double> loss = LogLoss(probabilities, labels);
  std::cout << absl::StrFormat("click_log_gen: wrote %d lines to %s (%.1f%% clicks)", lines, path,
                               lines > 0 ? 100.0 * clicked / lines : 0.0);
  if (auc.ok() && loss.ok()) {
    std::cout << absl::StrFormat("; the planted model's AUC on them %.4f, log loss %.4f", *auc,
                                 *loss);
  }
  std::cout << "\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes click logs in Criteo's format with a planted model, and its AUC on them.\n"
      "  bazel run //tools/data:click_log_gen -- --lines=1000000 --output=train.txt.gz "
      "--eval_lines=100000 --eval_output=eval.txt.gz");
  if (!cohort::ParseCanonicalCommandLine("click_log_gen", argc, argv, {})) return 2;
  const std::string user_dir = cohort::UserDirectory();
  const std::string output = cohort::ResolveUserPath(absl::GetFlag(FLAGS_output), user_dir);
  const std::string eval_output =
      cohort::ResolveUserPath(absl::GetFlag(FLAGS_eval_output), user_dir);
  if (output.empty() || (absl::GetFlag(FLAGS_eval_lines) > 0 && eval_output.empty())) {
    std::cerr << "click_log_gen: error: give --output=FILE (and --eval_output=FILE with "
                 "--eval_lines; see --help)\n";
    return 2;
  }
  cohort::PlantedClicks clicks({.seed = absl::GetFlag(FLAGS_seed),
                                .vocabulary = absl::GetFlag(FLAGS_vocabulary),
                                .head = absl::GetFlag(FLAGS_head),
                                .zipf = absl::GetFlag(FLAGS_zipf)});
  absl::Status written = cohort::WriteLog(clicks, absl::GetFlag(FLAGS_lines), output);
  if (written.ok() && absl::GetFlag(FLAGS_eval_lines) > 0) {
    written = cohort::WriteLog(clicks, absl::GetFlag(FLAGS_eval_lines), eval_output);
  }
  if (!written.ok()) {
    std::cerr << "click_log_gen: error: " << written.message() << "\n";
    return 1;
  }
  return 0;
}
