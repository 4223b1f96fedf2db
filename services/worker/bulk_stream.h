#ifndef COHORT_SERVICES_WORKER_BULK_STREAM_H_
#define COHORT_SERVICES_WORKER_BULK_STREAM_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/deadline_timer.h"
#include "services/wire/part_codec.h"
#include "services/wire/part_write_queue.h"
#include "services/worker/shard_transport.h"

namespace cohort {

// A worker's bulk stream to one shard, whatever carries it. Parts queue here and go out one
// write at a time, in model order, small ones fused (PartWriteQueue); answers are parsed in
// place and handed to the receiver on the carrier's thread.
class BulkStream {
 public:
  // fusion_wait: how long a small push may wait for others to fuse with (0: never); timer
  // flushes the streams once that has passed.
  BulkStream(int shard, AnswerReceiver* receiver, int64_t fusion_bytes,
             absl::Duration fusion_wait, DeadlineTimer* timer)
      : shard_(shard),
        receiver_(receiver),
        fusion_bytes_(fusion_bytes),
        fusion_wait_(fusion_wait),
        timer_(timer) {
    absl::MutexLock lock(&mu_);
    queue_.set_fusion_bytes(fusion_bytes);
  }
  virtual ~BulkStream() = default;

  // Queues the part. With the stream idle, the write starts at once, unless the parts queued
  // are fewer than a fusion's bytes: then they wait up to fusion_wait for more (or a Flush).
  void Send(const OutgoingPart& part) {
    bool hold = false;
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;  // the stream's end is (or will be) reported; the part is dropped
      queue_.Push(part);
      if (writing_) return;
      hold = fusion_wait_ > absl::ZeroDuration() &&
             queue_.queued_bytes() < static_cast<size_t>(fusion_bytes_);
      if (hold && flush_due_) return;  // the timer will flush them
      flush_due_ = hold;
      if (!hold) {
        writing_ = true;
        queue_.Pop(&batch_);
      }
    }
    if (hold) {
      timer_->FireBy(absl::Now() + fusion_wait_);
    } else {
      WriteBatch();
    }
  }

  // Starts writing what is queued if the stream is idle.
  void Flush() {
    {
      absl::MutexLock lock(&mu_);
      flush_due_ = false;
      if (writing_ || closing_ || queue_.empty()) return;
      writing_ = true;
      queue_.Pop(&batch_);
    }
    WriteBatch();
  }

  // Ends the stream and waits until its carrier is done with it: no answer arrives after this,
  // and every part sent has been released.
  virtual void Cancel() = 0;

 protected:
  // This thread has become the writer, with batch_ popped: write it (a carrier that writes at
  // once goes on with what is queued meanwhile).
  virtual void WriteBatch() = 0;

  // Answers of one message, parsed from `batch`, to the receiver.
  void Deliver(const ReceivedBatch& batch) {
    answers_.clear();
    for (size_t i = 0; i < batch.size(); ++i) {
      answers_.push_back({batch.header(i), batch.chunks(i)});
    }
    receiver_->OnAnswers(shard_, answers_);
  }

  const int shard_;
  AnswerReceiver* const receiver_;
  ReceivedBatch batch_in_;  // the reading side's
  // The write in flight: its parts (the writer's alone; see WriteBatch).
  std::vector<OutgoingPart> batch_;

  absl::Mutex mu_;
  PartWriteQueue queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;

 private:
  const int64_t fusion_bytes_;
  const absl::Duration fusion_wait_;
  DeadlineTimer* const timer_;
  std::vector<Answer> answers_;  // Deliver's
  bool flush_due_ ABSL_GUARDED_BY(mu_) = false;  // parts held; the timer will flush them
};

}  // namespace cohort

#endif  // COHORT_SERVICES_WORKER_BULK_STREAM_H_
