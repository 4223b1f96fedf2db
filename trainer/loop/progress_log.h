#ifndef COHORT_TRAINER_LOOP_PROGRESS_LOG_H_
#define COHORT_TRAINER_LOOP_PROGRESS_LOG_H_

#include <cstdint>
#include <ostream>
#include <string>

namespace cohort {

// One row of the training log: the steps since the previous row.
struct ProgressRow {
  int64_t step = 0;   // steps done
  int64_t epoch = 0;  // the epoch those steps belong to
  double images_per_second = 0;  // the whole job's
  double loss = 0;               // mean over the rows' steps
  double lr = 0;
  double comm_share = 0;  // share of the time spent in kvstore calls (0..1)
  double unix_seconds = 0;  // when the row was written
  double eta_seconds = -1;  // until the run's last step at this row's pace (-1: unknown)
};

// A duration as a person reads it at a glance: "45s", "3m05s", "2h07m", "3d04h"; "-" when
// negative (unknown).
std::string DurationText(double seconds);

// The training log: the table a person reads
//       Step  Epoch  Speed(img/s)      Loss        LR  Comm%      ETA
// and, when json is given, the same rows as JSON lines, one object per logged step:
//   {"step":100,"epoch":0,"images_per_second":5012.3,"loss":0.61,"lr":0.02,
//    "comm_overhead":0.12,"time":1795000000.5,"eta_seconds":84.2}
class ProgressLog {
 public:
  ProgressLog(std::ostream* table, std::ostream* json) : table_(table), json_(json) {}

  void Header();
  void Row(const ProgressRow& row);

 private:
  std::ostream* const table_;
  std::ostream* const json_;
};

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_PROGRESS_LOG_H_
