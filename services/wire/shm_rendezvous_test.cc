#include "services/wire/shm_rendezvous.h"

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

// A name no other test process of this host uses.
std::string UniqueName(const std::string& what) {
  return absl::StrCat("cohort-test-", what, "-", getpid());
}

absl::Status WriteString(ShmRing& ring, const std::string& s) {
  const absl::Span<const char> piece(s.data(), s.size());
  return ring.Write(absl::MakeConstSpan(&piece, 1));
}

absl::StatusOr<std::string> ReadString(ShmRing& ring) {
  absl::StatusOr<ShmRing::Message> m = ring.Read();
  if (!m.ok()) return m.status();
  std::string s(TotalBytes(m->bytes()), '\0');
  CopyChunks(m->bytes(), s.data());
  ring.Release();
  return s;
}

// With a pool, both sides map the same memory: what the dialer (another process) writes there,
// the listener reads where it lies; without one, neither side has a pool.
TEST(ShmRendezvousTest, APoolIsMemoryBothSidesMap) {
  for (const size_t pool_bytes : {size_t{0}, size_t{1} << 20}) {
    const std::string name = UniqueName(absl::StrCat("pool-", pool_bytes));
    auto listener = ShmListener::Listen(name, 1 << 12, pool_bytes);
    ASSERT_TRUE(listener.ok()) << listener.status();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      absl::StatusOr<ShmChannel> channel = DialShm(name);
      if (!channel.ok() || (channel->pool() != nullptr) != (pool_bytes > 0)) _exit(2);
      if (pool_bytes > 0) {
        if (channel->pool()->size() != pool_bytes) _exit(3);
        char* pool = channel->pool()->data();
        for (size_t i = 0; i < pool_bytes; ++i) pool[i] = static_cast<char>(i % 251);
      }
      if (!WriteString(channel->out(), "written").ok()) _exit(4);
      _exit(ReadString(channel->in()).ok() ? 0 : 5);
    }
    absl::StatusOr<ShmChannel> channel = (*listener)->Accept();
    ASSERT_TRUE(channel.ok()) << channel.status();
    ASSERT_EQ(ReadString(channel->in()).value_or(""), "written");
    ASSERT_EQ(channel->pool() != nullptr, pool_bytes > 0);
    for (size_t i = 0; i < pool_bytes; ++i) {
      ASSERT_EQ(channel->pool()->data()[i], static_cast<char>(i % 251)) << i;
    }
    ASSERT_TRUE(WriteString(channel->out(), "done").ok());
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
}

// A second process dials the listener by name, gets its two rings and echoes what comes in.
TEST(ShmRendezvousTest, ADialerInAnotherProcessGetsBothRings) {
  const std::string name = UniqueName("echo");
  auto listener = ShmListener::Listen(name, 1 << 16);
  ASSERT_TRUE(listener.ok()) << listener.status();
  constexpr int kMessages = 500;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<ShmChannel> channel = DialShm(name);
    if (!channel.ok()) _exit(2);
    for (int i = 0; i < kMessages; ++i) {
      absl::StatusOr<std::string> s = ReadString(channel->in());
      if (!s.ok() || !WriteString(channel->out(), "echo " + *s).ok()) _exit(3);
    }
    _exit(0);
  }
  absl::StatusOr<ShmChannel> channel = (*listener)->Accept();
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ(channel->peer_pid(), child);
  for (int i = 0; i < kMessages; ++i) {
    const std::string sent = std::string(i * 13 % 3000, 'a' + i % 26);
    ASSERT_TRUE(WriteString(channel->out(), sent).ok());
    absl::StatusOr<std::string> got = ReadString(channel->in());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, "echo " + sent) << i;
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// A dialer that exits without a word: the listener's reader stops waiting.
TEST(ShmRendezvousTest, ADialerThatDiesIsNoticed) {
  const std::string name = UniqueName("dies");
  auto listener = ShmListener::Listen(name, 4096);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<ShmChannel> channel = DialShm(name);
    usleep(50 * 1000);
    _exit(channel.ok() ? 0 : 2);  // no destructor: the socket closes with the process
  }
  absl::StatusOr<ShmChannel> channel = (*listener)->Accept();
  ASSERT_TRUE(channel.ok()) << channel.status();
  absl::StatusOr<ShmRing::Message> m = channel->in().Read();
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Closing a channel ends the other side's waits as closed, not as a failure.
TEST(ShmRendezvousTest, ClosingAChannelCancelsThePeersWaits) {
  const std::string name = UniqueName("close");
  auto listener = ShmListener::Listen(name, 4096);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::thread dialer([&] {
    absl::StatusOr<ShmChannel> channel = DialShm(name);
    ASSERT_TRUE(channel.ok()) << channel.status();
    ASSERT_TRUE(WriteString(channel->out(), "last words").ok());
  });  // the channel closes here
  absl::StatusOr<ShmChannel> channel = (*listener)->Accept();
  ASSERT_TRUE(channel.ok()) << channel.status();
  dialer.join();
  absl::StatusOr<std::string> got = ReadString(channel->in());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "last words");
  EXPECT_EQ(channel->in().Read().status().code(), absl::StatusCode::kCancelled);
}

TEST(ShmRendezvousTest, NobodyListeningIsNotFound) {
  absl::StatusOr<ShmChannel> channel = DialShm(UniqueName("nobody"));
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kNotFound) << channel.status();
}

// A shard at one address leaves the port free at others: each address has its own name.
TEST(ShmRendezvousTest, ShardNamesTellAddressesApart) {
  EXPECT_EQ(ShardRendezvousName("", 7000), "cohort-shard-7000");
  EXPECT_EQ(ShardRendezvousName("10.0.0.1", 7000), "cohort-shard-10.0.0.1:7000");
  EXPECT_NE(ShardRendezvousName("10.0.0.1", 7000), ShardRendezvousName("10.0.0.2", 7000));
}

TEST(ShmRendezvousTest, OneListenerPerName) {
  const std::string name = UniqueName("twice");
  auto first = ShmListener::Listen(name, 4096);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ShmListener::Listen(name, 4096);
  EXPECT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another process of this host listens there"),
            std::string::npos)
      << second.status();
  EXPECT_FALSE(ShmListener::Listen("", 4096).ok());
}

TEST(ShmRendezvousTest, CloseWakesAWaitingAccept) {
  auto listener = ShmListener::Listen(UniqueName("accept"), 4096);
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::Status accepted;
  std::thread waiter([&] { accepted = (*listener)->Accept().status(); });
  usleep(20 * 1000);
  (*listener)->Close();
  waiter.join();
  EXPECT_EQ(accepted.code(), absl::StatusCode::kCancelled) << accepted;
  EXPECT_EQ((*listener)->Accept().status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace cohort
