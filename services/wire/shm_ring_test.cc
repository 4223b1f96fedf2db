#include "services/wire/shm_ring.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Message i's bytes: a length and contents that differ from one message to the next.
std::string Payload(uint64_t i) {
  std::string s((i * 7919) % 1500, '\0');
  for (size_t k = 0; k < s.size(); ++k) s[k] = static_cast<char>((i * 31 + k * 7) & 0xff);
  return s;
}

std::string Gather(const ShmRing::Message& m) {
  std::string s(TotalBytes(m.bytes()), '\0');
  CopyChunks(m.bytes(), s.data());
  return s;
}

absl::Status WriteString(ShmRing& ring, const std::string& s) {
  // Two pieces, split unevenly, as a header and its values would be.
  const size_t cut = s.size() / 3;
  const absl::Span<const char> pieces[] = {absl::Span<const char>(s.data(), cut),
                                           absl::Span<const char>(s.data() + cut, s.size() - cut)};
  return ring.Write(pieces);
}

ShmRing::Fds Dup(const ShmRing::Fds& fds) { return {dup(fds.memory), dup(fds.data), dup(fds.space)}; }

// A small ring wraps every few messages: each one arrives once, in order, byte for byte,
// whether it lies in one chunk or two.
TEST(ShmRingTest, MessagesArriveInOrderWithTheirBytes) {
  auto ring = ShmRing::Create(4096);
  ASSERT_TRUE(ring.ok()) << ring.status();
  constexpr uint64_t kMessages = 20000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kMessages; ++i) ASSERT_TRUE(WriteString(**ring, Payload(i)).ok());
  });
  int wrapped = 0;
  for (uint64_t i = 0; i < kMessages; ++i) {
    auto m = (*ring)->Read();
    ASSERT_TRUE(m.ok()) << m.status();
    wrapped += m->num_chunks == 2;
    ASSERT_EQ(Gather(*m), Payload(i)) << "message " << i;
    (*ring)->Release();
  }
  producer.join();
  EXPECT_GT(wrapped, 100);
}

// Another process attaches to the descriptors and echoes every message back on a second ring.
TEST(ShmRingTest, AnotherProcessEchoes) {
  auto there = ShmRing::Create(1 << 16);
  auto back = ShmRing::Create(1 << 16);
  ASSERT_TRUE(there.ok() && back.ok());
  constexpr uint64_t kMessages = 2000;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto in = ShmRing::Attach(Dup((*there)->fds()));
    auto out = ShmRing::Attach(Dup((*back)->fds()));
    if (!in.ok() || !out.ok()) _exit(2);
    for (uint64_t i = 0; i < kMessages; ++i) {
      auto m = (*in)->Read();
      if (!m.ok()) _exit(3);
      const std::string s = Gather(*m);
      (*in)->Release();
      if (!WriteString(**out, s).ok()) _exit(4);
    }
    _exit(0);
  }
  std::thread producer([&] {
    for (uint64_t i = 0; i < kMessages; ++i) ASSERT_TRUE(WriteString(**there, Payload(i)).ok());
  });
  for (uint64_t i = 0; i < kMessages; ++i) {
    auto m = (*back)->Read();
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(Gather(*m), Payload(i)) << "message " << i;
    (*back)->Release();
  }
  producer.join();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A peer that exits without a word leaves neither a reader nor a writer on a full ring waiting.
TEST(ShmRingTest, APeerThatDiesIsNoticed) {
  auto ring = ShmRing::Create(4096);
  ASSERT_TRUE(ring.ok());
  int sockets[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(sockets[0]);
    usleep(50 * 1000);  // the parent is asleep in Read by now, most likely
    _exit(0);           // the socket closes with the process
  }
  close(sockets[1]);
  (*ring)->WatchPeer(sockets[0]);
  auto m = (*ring)->Read();
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
  // A writer whose consumer is gone: the ring fills, then the wait fails.
  const std::string big(1000, 'x');
  absl::Status written;
  for (int i = 0; i < 10 && written.ok(); ++i) written = WriteString(**ring, big);
  EXPECT_EQ(written.code(), absl::StatusCode::kUnavailable) << written;
  int status = 0;
  waitpid(child, &status, 0);
  close(sockets[0]);
}

// A writer whose reader has stopped (alive, but not reading) gives up at its timeout.
TEST(ShmRingTest, AWriterWhoseReaderStopsGivesUpAtItsTimeout) {
  auto ring = ShmRing::Create(4096);
  ASSERT_TRUE(ring.ok());
  const std::string big(1000, 'x');
  const absl::Span<const char> piece(big.data(), big.size());
  absl::Status written;
  for (int i = 0; i < 10 && written.ok(); ++i) {
    written = (*ring)->Write(absl::MakeConstSpan(&piece, 1), absl::Milliseconds(50));
  }
  EXPECT_EQ(written.code(), absl::StatusCode::kDeadlineExceeded) << written;
}

// Memory another process could shrink under this one's mapping is not taken as a ring.
TEST(ShmRingTest, AnUnsealedMemfdIsRefused) {
  auto ring = ShmRing::Create(4096);
  ASSERT_TRUE(ring.ok());
  const int unsealed = memfd_create("not-a-ring", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 4096 * 2), 0);
  ShmRing::Fds fds = Dup((*ring)->fds());
  close(fds.memory);
  fds.memory = unsealed;
  auto attached = ShmRing::Attach(fds);
  EXPECT_EQ(attached.status().code(), absl::StatusCode::kInvalidArgument) << attached.status();
}

// Close wakes a waiting reader; what was written before it is still read first.
TEST(ShmRingTest, CloseWakesAWaitingReaderAfterTheLastMessage) {
  auto ring = ShmRing::Create(4096);
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE(WriteString(**ring, "last words").ok());
  auto m = (*ring)->Read();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Gather(*m), "last words");
  (*ring)->Release();
  std::thread closer([&] {
    usleep(20 * 1000);
    (*ring)->Close();
  });
  auto next = (*ring)->Read();
  closer.join();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kCancelled) << next.status();
  EXPECT_EQ(WriteString(**ring, "late").code(), absl::StatusCode::kCancelled);
}

TEST(ShmRingTest, RefusesWhatCannotWork) {
  EXPECT_EQ(ShmRing::Create(5000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShmRing::Create(1024).status().code(), absl::StatusCode::kInvalidArgument);
  auto ring = ShmRing::Create(4096);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(WriteString(**ring, std::string(4089, 'x')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(WriteString(**ring, std::string(4088, 'x')).ok());  // exactly the ring
  // Sealed shared memory that is not a ring (no magic).
  auto region = ShmRegion::Create(8192, "a test region");
  ASSERT_TRUE(region.ok()) << region.status();
  ShmRing::Fds fake{dup((*region)->fd()), dup((*ring)->fds().data), dup((*ring)->fds().space)};
  const auto attached = ShmRing::Attach(fake);
  EXPECT_EQ(attached.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(attached.status().message().find("not one"), std::string::npos)
      << attached.status();
}

}  // namespace
}  // namespace cohort
