#include "services/wire/part_write_queue.h"

#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string Text(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer Message(const std::string& text) {
  grpc::Slice slice(text.data(), text.size());
  return grpc::ByteBuffer(&slice, 1);
}

// Pushed last layer first (as backward produces them), popped first layer first.
TEST(PartWriteQueueTest, PopsInModelOrderWhateverThePushOrder) {
  PartWriteQueue queue;
  queue.Push({7, 0}, Message("7.0"));
  queue.Push({3, 1}, Message("3.1"));
  queue.Push({3, 0}, Message("3.0"));
  queue.Push({0, 2}, Message("0.2"));
  std::string order;
  while (!queue.empty()) order += Text(queue.Pop()) + " ";
  EXPECT_EQ(order, "0.2 3.0 3.1 7.0 ");
  queue.Push({1, 0}, Message("x"));
  queue.Clear();
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace cohort
