// The worker's end of a shard's shared-memory rings: pushes reach the shard's ring, answers
// reach the receiver, and the stream's end (the shard's, or a cancel) is reported once.

#include "services/worker/shm_shard_stream.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "services/common/deadline_timer.h"
#include "services/wire/part_codec.h"
#include "services/wire/ring_stream.h"

namespace cohort {
namespace {

// What the stream delivered.
class Receiver final : public AnswerReceiver {
 public:
  void OnAnswers(int shard, absl::Span<const Answer> answers) override {
    absl::MutexLock lock(&mu_);
    for (const Answer& a : answers) answered_.push_back(a.header.id);
  }
  void OnStreamEnd(int shard, const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    ++ends_;
    end_ = status;
  }

  std::vector<PartId> WaitForAnswers(size_t n) {
    absl::MutexLock lock(&mu_);
    wanted_ = n;
    mu_.AwaitWithTimeout(absl::Condition(this, &Receiver::Answered), absl::Seconds(10));
    return answered_;
  }
  absl::Status WaitForEnd() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &Receiver::Ended), absl::Seconds(10));
    return end_;
  }
  int ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }

 private:
  bool Answered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answered_.size() >= wanted_; }
  bool Ended() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ends_ > 0; }

  absl::Mutex mu_;
  std::vector<PartId> answered_ ABSL_GUARDED_BY(mu_);
  size_t wanted_ ABSL_GUARDED_BY(mu_) = 0;
  int ends_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
};

class ShmShardStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = ShmListener::Listen(name_, 1 << 16);
    ASSERT_TRUE(listener.ok()) << listener.status();
    std::optional<absl::StatusOr<ShmChannel>> shard_end;
    std::thread accept([&] { shard_end.emplace((*listener)->Accept()); });
    absl::StatusOr<ShmChannel> worker_end = DialShm(name_);
    accept.join();
    ASSERT_TRUE(worker_end.ok()) << worker_end.status();
    ASSERT_TRUE(shard_end->ok()) << shard_end->status();
    shard_.emplace(**std::move(shard_end));
    stream_ = MakeShmShardStream(/*shard=*/3, *std::move(worker_end), &receiver_,
                                 /*fusion_bytes=*/0, absl::ZeroDuration(), &timer_);
  }

  const std::string name_ = absl::StrCat("cohort-test-shm-shard-stream-", getpid());
  DeadlineTimer timer_{[] {}};
  Receiver receiver_;
  std::optional<ShmChannel> shard_;
  std::unique_ptr<BulkStream> stream_;
};

// A push arrives on the shard's ring as one batch; the shard's answer reaches the receiver.
TEST_F(ShmShardStreamTest, APushArrivesAndItsAnswerIsDelivered) {
  const std::vector<float> gradient = {1, 2, 3};
  stream_->Send({PartHeader{{5, 1}, 7, 0}, gradient});

  absl::StatusOr<ShmRing::Message> m = shard_->in().Read();
  ASSERT_TRUE(m.ok()) << m.status();
  ReceivedBatch pushed;
  ASSERT_TRUE(pushed.Parse(m->bytes()).ok());
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed.header(0).id, (PartId{5, 1}));
  std::vector<float> got(3);
  CopyChunks(pushed.chunks(0), got.data());
  EXPECT_EQ(got, gradient);
  pushed.Clear();
  shard_->in().Release();

  const std::vector<float> value = {4, 5, 6};
  const OutgoingPart answer[] = {{PartHeader{{5, 1}, 8, 0}, value}};
  RingBatchWriter writer;
  ASSERT_TRUE(writer.Write(shard_->out(), answer).ok());
  EXPECT_EQ(receiver_.WaitForAnswers(1), (std::vector<PartId>{{5, 1}}));
  EXPECT_EQ(receiver_.ends(), 0);
}

// The shard ends the stream saying why: the receiver hears it, once.
TEST_F(ShmShardStreamTest, TheShardsEndIsReported) {
  ASSERT_TRUE(WriteStreamEnd(shard_->out(), absl::InvalidArgumentError("no such part")).ok());
  EXPECT_EQ(receiver_.WaitForEnd(), absl::InvalidArgumentError("no such part"));
  stream_->Cancel();
  EXPECT_EQ(receiver_.ends(), 1);
}

// A cancelled stream reports Cancelled and closes the shard's rings.
TEST_F(ShmShardStreamTest, CancelEndsTheStream) {
  stream_->Cancel();
  EXPECT_TRUE(absl::IsCancelled(receiver_.WaitForEnd()));
  EXPECT_FALSE(shard_->in().Read().ok());
}

}  // namespace
}  // namespace cohort
