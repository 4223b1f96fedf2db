#include "trainer/loop/progress_log.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"

namespace cohort {

void ProgressLog::Header() {
  *table_ << absl::StrFormat("%8s %6s %13s %9s %9s %6s\n", "Step", "Epoch", "Speed(img/s)", "Loss",
                             "LR", "Comm%");
}

void ProgressLog::Row(const ProgressRow& row) {
  *table_ << absl::StrFormat("%8d %6d %13.1f %9.4f %9.5f %6.1f\n", row.step, row.epoch,
                             row.images_per_second, row.loss, row.lr, 100 * row.comm_share);
  table_->flush();
  if (json_ == nullptr) return;
  const nlohmann::json j = {{"step", row.step},
                            {"epoch", row.epoch},
                            {"images_per_second", row.images_per_second},
                            {"loss", row.loss},
                            {"lr", row.lr},
                            {"comm_overhead", row.comm_share},
                            {"time", row.unix_seconds}};
  *json_ << j.dump() << "\n";
  json_->flush();
}

}  // namespace cohort
