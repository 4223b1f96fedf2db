#include "services/wire/part_write_queue.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

OutgoingPart Part(int64_t key, int part, absl::Span<const float> values, PinCount* pin = nullptr) {
  return OutgoingPart{PartHeader{{key, part}}, values, pin};
}

// The messages the queue gives, each as the keys.parts it fused, until it is empty.
std::string Drain(PartWriteQueue* queue) {
  std::string order;
  std::vector<OutgoingPart> batch;
  while (!queue->empty()) {
    queue->Pop(&batch);
    order += "[";
    for (const OutgoingPart& p : batch) {
      order += absl::StrCat(p.header.id.key, ".", p.header.id.part, p.header.id == batch.back().header.id ? "" : " ");
      if (p.pin != nullptr) p.pin->Unpin();  // as SerializeBatch does
    }
    order += "]";
  }
  return order;
}

// Pushed last layer first (as backward produces them), popped first layer first.
TEST(PartWriteQueueTest, PopsInModelOrderWhateverThePushOrder) {
  const std::vector<float> v(4);
  PartWriteQueue queue;  // no fusion
  queue.Push(Part(7, 0, v));
  queue.Push(Part(3, 1, v));
  queue.Push(Part(3, 0, v));
  queue.Push(Part(0, 2, v));
  EXPECT_EQ(queue.queued_bytes(), 4 * 16u);
  EXPECT_EQ(Drain(&queue), "[0.2][3.0][3.1][7.0]");
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

// Small parts are fused, most urgent first, into messages of at most fusion_bytes; a part as
// large as that travels alone, and the fusion stops before it.
TEST(PartWriteQueueTest, FusesSmallPartsUpToTheBound) {
  const std::vector<float> small(25), large(100);  // 100 and 400 bytes
  PartWriteQueue queue(400);
  for (int key = 9; key >= 0; --key) queue.Push(Part(key, 0, key == 5 ? large : small));
  EXPECT_EQ(Drain(&queue), "[0.0 1.0 2.0 3.0][4.0][5.0][6.0 7.0 8.0 9.0]");
  // Encoded sizes count: the same values in 16 bits take half as many bytes.
  for (int key = 0; key < 8; ++key) {
    OutgoingPart p = Part(key, 0, small);
    p.header.encoding = WireEncoding::kBF16;
    queue.Push(p);
  }
  EXPECT_EQ(Drain(&queue), "[0.0 1.0 2.0 3.0 4.0 5.0 6.0 7.0]");
}

TEST(PartWriteQueueTest, HoldsPinsUntilPoppedOrDropped) {
  const std::vector<float> v(4);
  PinCount pin;
  PartWriteQueue queue(1 << 20);
  queue.Push(Part(1, 0, v, &pin));
  queue.Push(Part(2, 0, v, &pin));
  EXPECT_EQ(pin.count(), 2);
  queue.Clear();
  EXPECT_EQ(pin.count(), 0);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

}  // namespace
}  // namespace cohort
