#include "services/common/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(CheckOpeningTest, TlsPortsTakeAHandshakeRecordAndPlaintextPortsHttp2) {
  EXPECT_EQ(CheckOpening(Opening::kTls, 0x16), std::nullopt);
  EXPECT_EQ(CheckOpening(Opening::kTls, 'P'), ConnectionRefusal::kNotTls);
  EXPECT_EQ(CheckOpening(Opening::kTls, 'G'), ConnectionRefusal::kNotTls);
  EXPECT_EQ(CheckOpening(Opening::kHttp2, 'P'), std::nullopt);
  EXPECT_EQ(CheckOpening(Opening::kHttp2, 0x16), ConnectionRefusal::kTlsOnPlaintext);
  EXPECT_EQ(CheckOpening(Opening::kHttp2, 'G'), ConnectionRefusal::kNotGrpc);
  EXPECT_EQ(CheckOpening(Opening::kHttp2, 0), ConnectionRefusal::kNotGrpc);
}

// A gate on 127.0.0.1 whose admitted connections and refusals the test reads.
class GateTest : public ::testing::Test {
 protected:
  void StartGate(Opening expected, ConnectionLimits limits = {}) {
    auto socket = ListenSocket::Open("127.0.0.1", 0);
    ASSERT_TRUE(socket.ok()) << socket.status();
    auto gate = ConnectionGate::Start(
        *std::move(socket), expected, limits,
        [this](int fd) {
          absl::MutexLock lock(&mu_);
          admitted_.push_back(fd);
        },
        [this](ConnectionRefusal reason, const std::string& peer) {
          absl::MutexLock lock(&mu_);
          refused_.push_back({reason, peer});
        });
    ASSERT_TRUE(gate.ok()) << gate.status();
    gate_ = *std::move(gate);
  }

  void TearDown() override {
    gate_.reset();
    for (int fd : admitted_) close(fd);
    for (int fd : clients_) close(fd);
  }

  // A connected client; its local "127.0.0.1:port" in *name.
  int Connect(std::string* name = nullptr) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(gate_->port()));
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    if (name != nullptr) {
      sockaddr_in local{};
      socklen_t length = sizeof(local);
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
      *name = "127.0.0.1:" + std::to_string(ntohs(local.sin_port));
    }
    clients_.push_back(fd);
    return fd;
  }

  void Send(int fd, const std::string& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // Whether the gate closed the client's connection within `within`.
  static bool ClosedByServer(int fd, absl::Duration within) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(within))) != 1) return false;
    char byte;
    return recv(fd, &byte, 1, 0) <= 0;
  }

  bool WaitFor(const std::function<bool()>& done, absl::Duration within = absl::Seconds(5)) {
    const absl::Time until = absl::Now() + within;
    while (absl::Now() < until) {
      {
        absl::MutexLock lock(&mu_);
        if (done()) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  struct Refused {
    ConnectionRefusal reason;
    std::string peer;
  };
  absl::Mutex mu_;
  std::vector<int> admitted_ ABSL_GUARDED_BY(mu_);
  std::vector<Refused> refused_ ABSL_GUARDED_BY(mu_);
  std::vector<int> clients_;
  std::unique_ptr<ConnectionGate> gate_;
};

TEST_F(GateTest, AHandshakeIsHandedOverWithItsBytesUnread) {
  StartGate(Opening::kTls);
  const int client = Connect();
  Send(client, "\x16\x03\x01hello");
  ASSERT_TRUE(WaitFor([&] { return admitted_.size() == 1; }));
  int fd;
  {
    absl::MutexLock lock(&mu_);
    fd = admitted_[0];
    EXPECT_TRUE(refused_.empty());
  }
  char bytes[8] = {};
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 1000), 1);
  ASSERT_EQ(recv(fd, bytes, 8, 0), 8);
  EXPECT_EQ(std::string(bytes, 8), "\x16\x03\x01hello");
}

TEST_F(GateTest, PlaintextOnATlsPortIsClosedAndReportedWithThePeer) {
  StartGate(Opening::kTls);
  std::string name;
  const int client = Connect(&name);
  Send(client, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  EXPECT_TRUE(ClosedByServer(client, absl::Seconds(5)));
  ASSERT_TRUE(WaitFor([&] { return refused_.size() == 1; }));
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(refused_[0].reason, ConnectionRefusal::kNotTls);
  EXPECT_EQ(refused_[0].peer, name);
  EXPECT_TRUE(admitted_.empty());
}

TEST_F(GateTest, APlaintextPortTakesHttp2AndRefusesTlsAndOtherBytes) {
  StartGate(Opening::kHttp2);
  const int grpc = Connect();
  Send(grpc, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  const int tls = Connect();
  Send(tls, "\x16\x03\x01");
  const int http = Connect();
  Send(http, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(ClosedByServer(tls, absl::Seconds(5)));
  EXPECT_TRUE(ClosedByServer(http, absl::Seconds(5)));
  ASSERT_TRUE(WaitFor([&] { return admitted_.size() == 1 && refused_.size() == 2; }));
  absl::MutexLock lock(&mu_);
  std::vector<ConnectionRefusal> reasons = {refused_[0].reason, refused_[1].reason};
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), ConnectionRefusal::kTlsOnPlaintext),
            reasons.end());
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), ConnectionRefusal::kNotGrpc),
            reasons.end());
}

TEST_F(GateTest, ASilentConnectionIsClosedAtItsDeadline) {
  ConnectionLimits limits;
  limits.request_deadline = absl::Milliseconds(300);
  StartGate(Opening::kTls, limits);
  const absl::Time start = absl::Now();
  const int client = Connect();
  EXPECT_TRUE(ClosedByServer(client, absl::Seconds(5)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(3));
  ASSERT_TRUE(WaitFor([&] { return refused_.size() == 1; }));
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(refused_[0].reason, ConnectionRefusal::kSilent);
}

TEST_F(GateTest, APeerPastItsLimitLosesItsLongestWaitingConnection) {
  ConnectionLimits limits;
  limits.max_connections_per_peer = 2;
  StartGate(Opening::kTls, limits);
  std::string oldest;
  const int first = Connect(&oldest);
  absl::SleepFor(absl::Milliseconds(50));  // the gate accepts it before the next ones
  Connect();
  absl::SleepFor(absl::Milliseconds(50));
  const int third = Connect();
  EXPECT_TRUE(ClosedByServer(first, absl::Seconds(5)));
  ASSERT_TRUE(WaitFor([&] { return refused_.size() == 1; }));
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(refused_[0].reason, ConnectionRefusal::kTooMany);
    EXPECT_EQ(refused_[0].peer, oldest);
  }
  // The newest still gets its turn.
  Send(third, "\x16\x03\x01");
  EXPECT_TRUE(WaitFor([&] { return admitted_.size() == 1; }));
}

// Many connections of one address at once, each sending its first byte as soon as it is
// connected (a job's workers starting together on one host): none is closed as one too many.
TEST_F(GateTest, ABurstOfConnectionsThatSpeakAtOnceIsAllHandedOver) {
  ConnectionLimits limits;
  limits.max_connections_per_peer = 2;
  StartGate(Opening::kTls, limits);
  const int n = 16;
  for (int i = 0; i < n; ++i) Send(Connect(), "\x16\x03\x01");
  EXPECT_TRUE(WaitFor([&] { return admitted_.size() == n; }));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(refused_.empty()) << refused_.size() << " refused, the first as "
                                << ConnectionRefusalName(refused_.front().reason);
}

TEST_F(GateTest, AClientThatHangsUpWithoutAWordIsNotARefusal) {
  ConnectionLimits limits;
  limits.request_deadline = absl::Milliseconds(300);
  StartGate(Opening::kTls, limits);
  const int client = Connect();
  shutdown(client, SHUT_RDWR);
  absl::SleepFor(absl::Milliseconds(600));
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(refused_.empty());
  EXPECT_TRUE(admitted_.empty());
}

}  // namespace
}  // namespace cohort
