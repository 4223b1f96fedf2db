#ifndef COHORT_TRAINER_LOOP_TRAINING_OBSERVER_H_
#define COHORT_TRAINER_LOOP_TRAINING_OBSERVER_H_

#include <cstdint>

namespace cohort {

// What the training loop tells an observer (a worker's metrics) about each step, in a header of
// its own: an observer needs these types, not the loop.

// One step, timed: the phases add up to the step's time on its caller (with several replicas,
// forward and backward are the first replica's, less the kvstore calls made meanwhile).
struct StepResult {
  double loss = 0;  // the batch's mean loss
  double forward_seconds = 0;   // forward and loss, waits for pulled values excluded
  double backward_seconds = 0;  // backward, pushes excluded
  double push_seconds = 0;      // in the kvstore's PushPull calls
  double pull_seconds = 0;      // waiting for pulled values
  int64_t pushed_bytes = 0;     // gradients handed to the kvstore
  int64_t pulled_bytes = 0;     // values received from it

  // Time in kvstore calls, waiting included: communication not hidden behind computation.
  double comm_seconds() const { return push_seconds + pull_seconds; }
};

// One training step of this rank, as its metrics see it.
struct StepReport {
  int64_t step = 0;   // steps done, this one included
  int64_t epoch = 0;  // the epoch it belongs to
  int64_t images = 0;  // this rank's local batch
  double lr = 0;
  double step_seconds = 0;  // the whole iteration: waiting for data, then the step
  double data_seconds = 0;  // waiting for the batch
  StepResult step_result;   // loss, phases and bytes of the step itself
  int64_t total_steps = 0;  // of the whole run
  int64_t skipped_samples = 0;  // damaged samples this rank skipped so far (--skip_corrupt)
  // The most bytes of tensors in use at once so far on the first device context: a GPU's
  // memory, or on CPUs the process's host tensors.
  int64_t memory_peak_bytes = 0;
};

// Told about every step, on the training thread: keep it cheap.
class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void StepDone(const StepReport& report) = 0;
  // The lead rank evaluated the model after an epoch (top-1 accuracy on the test set, percent).
  virtual void EpochEvaluated(int64_t /*epoch*/, double /*test_top1*/) {}
};

}  // namespace cohort

#endif  // COHORT_TRAINER_LOOP_TRAINING_OBSERVER_H_
