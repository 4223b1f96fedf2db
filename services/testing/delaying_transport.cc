#include "services/testing/delaying_transport.h"

#include "absl/time/clock.h"
#include "trainer/base/random.h"

namespace cohort {
namespace {

class DelayingTransport final : public ShardTransport {
 public:
  DelayingTransport(std::unique_ptr<ShardTransport> inner, uint64_t seed, int num_workers)
      : inner_(std::move(inner)), seed_(seed), num_workers_(num_workers) {}

  int num_shards() const override { return inner_->num_shards(); }
  std::string shard_address(int shard) const override { return inner_->shard_address(shard); }
  absl::StatusOr<int64_t> InitShard(int shard, const ShardConfig& config,
                                    absl::Span<const InitialPart> parts) override {
    return inner_->InitShard(shard, config, parts);
  }
  absl::Status RollBack(int shard, int64_t step,
                        const std::optional<Regeneration>& next) override {
    return inner_->RollBack(shard, step, next);
  }
  absl::StatusOr<ShardCheckpoints> ListCheckpoints(int shard) override {
    return inner_->ListCheckpoints(shard);
  }
  void Redial(std::vector<std::string> addresses) override {
    inner_->Redial(std::move(addresses));
  }
  void Open(AnswerReceiver* receiver) override { inner_->Open(receiver); }
  void Reopen(int shard, const std::string& address, AnswerReceiver* receiver) override {
    inner_->Reopen(shard, address, receiver);
  }
  void Send(int shard, const OutgoingPart& part) override {
    const PartHeader& header = part.header;
    const uint64_t h =
        MixKeys({seed_, static_cast<uint64_t>(header.version),
                 static_cast<uint64_t>(header.id.key), static_cast<uint64_t>(header.id.part)});
    if (static_cast<int>(h % num_workers_) == header.rank) {
      absl::SleepFor(absl::Microseconds((h >> 16) % 3000));
    }
    inner_->Send(shard, part);
  }
  void Flush() override { inner_->Flush(); }
  void Close() override { inner_->Close(); }
  absl::StatusOr<PartHeader> Pull(int shard, PartId id, std::vector<float>* out) override {
    return inner_->Pull(shard, id, out);
  }

 private:
  const std::unique_ptr<ShardTransport> inner_;
  const uint64_t seed_;
  const int num_workers_;
};

}  // namespace

std::unique_ptr<ShardTransport> MakeDelayingTransport(std::unique_ptr<ShardTransport> inner,
                                                      uint64_t seed, int num_workers) {
  return std::make_unique<DelayingTransport>(std::move(inner), seed, num_workers);
}

}  // namespace cohort
