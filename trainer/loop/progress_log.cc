#include "trainer/loop/progress_log.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"

namespace cohort {

std::string DurationText(double seconds) {
  if (!(seconds >= 0)) return "-";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

void ProgressLog::Header() {
  *table_ << absl::StrFormat("%8s %6s %13s %9s %9s %6s %8s\n", "Step", "Epoch", "Speed(img/s)",
                             "Loss", "LR", "Comm%", "ETA");
}

void ProgressLog::Row(const ProgressRow& row) {
  *table_ << absl::StrFormat("%8d %6d %13.1f %9.4f %9.5f %6.1f %8s\n", row.step, row.epoch,
                             row.images_per_second, row.loss, row.lr, 100 * row.comm_share,
                             DurationText(row.eta_seconds));
  table_->flush();
  if (json_ == nullptr) return;
  const nlohmann::json j = {{"step", row.step},
                            {"epoch", row.epoch},
                            {"images_per_second", row.images_per_second},
                            {"loss", row.loss},
                            {"lr", row.lr},
                            {"comm_overhead", row.comm_share},
                            {"time", row.unix_seconds},
                            {"eta_seconds", row.eta_seconds}};
  *json_ << j.dump() << "\n";
  json_->flush();
}

}  // namespace cohort
