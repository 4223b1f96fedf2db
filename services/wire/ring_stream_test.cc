#include "services/wire/ring_stream.h"

#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Batches and the stream's end through one ring: the parts arrive as sent, their pins are
// released once copied, and the end's status arrives whole.
TEST(RingStreamTest, BatchesThenTheEndArrive) {
  auto ring = ShmRing::Create(1 << 16);
  ASSERT_TRUE(ring.ok()) << ring.status();
  const std::vector<float> a = {1, 2, 3}, b(1000, 0.5f);
  PinCount pin;
  pin.Pin();
  pin.Pin();
  const OutgoingPart parts[] = {{PartHeader{{3, 0}, 7, 1}, a, &pin},
                                {PartHeader{{4, 1}, 7, 1, 0, WireEncoding::kBF16}, b, &pin}};
  RingBatchWriter writer;
  ASSERT_TRUE(writer.Write(**ring, parts).ok());
  EXPECT_EQ(pin.count(), 0);
  ASSERT_TRUE(WriteStreamEnd(**ring, absl::InvalidArgumentError("worker 1: no such part")).ok());

  auto m = (*ring)->Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(StreamEnd(m->bytes()).has_value());
  ReceivedBatch batch;
  ASSERT_TRUE(batch.Parse(m->bytes()).ok());
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch.header(0).id, (PartId{3, 0}));
  EXPECT_EQ(batch.header(1).encoding, WireEncoding::kBF16);
  std::vector<float> got(3);
  CopyChunks(batch.chunks(0), got.data());
  EXPECT_EQ(got, a);
  batch.Clear();
  (*ring)->Release();

  m = (*ring)->Read();
  ASSERT_TRUE(m.ok()) << m.status();
  const std::optional<absl::Status> end = StreamEnd(m->bytes());
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(*end, absl::InvalidArgumentError("worker 1: no such part"));
  (*ring)->Release();
}

}  // namespace
}  // namespace cohort
