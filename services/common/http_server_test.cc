#include "services/common/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "services/common/addresses.h"
#include "services/common/job_certs_testing.h"
#include "services/common/metrics.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

// A TCP connection to 127.0.0.1:port from the loopback address `from` (any 127.x.y.z is this
// host's, so tests can be several peers); -1 when it fails.
int ConnectFrom(const char* from, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  inet_pton(AF_INET, from, &source.sin_addr);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed fd (a read sees the end, or the reset) within `wait`.
bool ClosedByServer(int fd, absl::Duration wait) {
  const int64_t us = absl::ToInt64Microseconds(wait);
  timeval timeout{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

HttpEndpoint Local(int port) { return {"127.0.0.1", port}; }

// The whole answer (status line, headers, body) to GET path from 127.0.0.1:port.
std::string Get(int port, const std::string& path) {
  const int fd = ConnectFrom("127.0.0.1", port);
  if (fd < 0) return "connect failed";
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  send(fd, request.data(), request.size(), 0);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  close(fd);
  return answer;
}

TEST(HttpGetTest, FetchesABodyAndSaysWhenNothingAnswers) {
  const std::string big(100000, 'x');  // more than one read
  auto server = HttpServer::Start({}, {{"/big", [&] {
                                                      return HttpResponse{200, "text/plain", big};
                                                    }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto got = HttpGet(Local(port), "/big");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->content_type, "text/plain");
  EXPECT_EQ(got->body, big);
  auto missing = HttpGet(Local(port), "/nothing");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->status, 404);
  server->reset();
  auto gone = HttpGet(Local(port), "/big");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(gone.status().message().find(absl::StrCat("127.0.0.1:", port, "/big")),
            std::string::npos)
      << gone.status();
}

TEST(HttpServerTest, ServesEachRouteOnThePortItGot) {
  int calls = 0;
  auto server = HttpServer::Start({},
                                  {{"/hello", [&] {
                                      ++calls;
                                      return HttpResponse{200, "text/plain", "hi\n"};
                                    }},
                                   {"/status", [] {
                                      return HttpResponse{200, "application/json", "{}"};
                                    }}});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  const std::string hello = Get((*server)->port(), "/hello");
  EXPECT_EQ(hello.rfind("HTTP/1.1 200", 0), 0u) << hello;
  EXPECT_NE(hello.find("\r\n\r\nhi\n"), std::string::npos) << hello;
  EXPECT_NE(Get((*server)->port(), "/status").find("application/json"), std::string::npos);
  EXPECT_EQ(Get((*server)->port(), "/nothing").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Get((*server)->port(), "/hello/more").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(calls, 1);
}

TEST(HttpServerTest, ListensOnIpv6AsGrpcWritesIt) {
  HttpServerOptions v6;
  v6.bind = "[::1]";
  auto server = HttpServer::Start(v6, {{"/healthz", [] { return HttpResponse{}; }}});
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status();
  auto got = HttpGet({"::1", (*server)->port()}, "/healthz");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
}

TEST(HttpServerTest, ATakenPortIsAnErrorNamingIt) {
  auto first = HttpServer::Start({}, {});
  ASSERT_TRUE(first.ok()) << first.status();
  HttpServerOptions taken;
  taken.port = (*first)->port();
  auto second = HttpServer::Start(taken, {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string((*first)->port())),
            std::string::npos)
      << second.status();
}

TEST(HttpServerTest, RequestsTheGuardRefusesGet401AndNeverReachTheHandler) {
  int handled = 0;
  std::vector<std::string> seen;
  auto server = HttpServer::Start(
      {}, {{"/status", [&] {
                          ++handled;
                          return HttpResponse{200, "application/json", "{}"};
                        }}},
      [&](absl::string_view authorization, absl::string_view peer, absl::string_view path) {
        seen.push_back(absl::StrCat(path, " ", peer.substr(0, peer.find(':'))));
        return authorization == "Bearer t0ken";
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto without = HttpGet(Local(port), "/status");
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->status, 401);
  auto wrong = HttpGet(Local(port), "/status", "Bearer guess");
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(handled, 0);
  auto with = HttpGet(Local(port), "/status", "Bearer t0ken");
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->status, 200);
  EXPECT_EQ(with->body, "{}");
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(seen, std::vector<std::string>(3, "/status 127.0.0.1"));
}

TEST(ServeMetricsTest, ATlsJobServesHttpsOnlyAndHealthNeedsNoTokenWhereMetricsDo) {
  const std::string dir = TmpDir() + "/health-job";
  ASSERT_TRUE(MakeJobCerts(dir, "worker").ok());
  ASSERT_TRUE(WriteToken(dir + "/token", "s3cret").ok());
  auto security = LoadSecurity(dir, "worker", dir + "/token");
  ASSERT_TRUE(security.ok()) << security.status();
  ProcessMetrics metrics("job-1", "worker", 0, *security);
  auto server = ServeMetrics("127.0.0.1", 0, "", {metrics.Route()}, *security);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->https());
  const HttpEndpoint job{"127.0.0.1", (*server)->port(), (*security)->ca_pem()};
  auto health = HttpGet(job, kHealthPath);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto page = HttpGet(job, "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->status, 401);
  page = HttpGet(job, "/metrics", "Bearer s3cret");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("cohort_refused_requests_total"), std::string::npos);
  // The token never crosses in clear: plain HTTP is refused in the handshake.
  auto plain = HttpGet(Local((*server)->port()), "/metrics", "Bearer s3cret");
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kUnavailable) << plain->status;
  EXPECT_EQ(Get((*server)->port(), kHealthPath).find("HTTP/1.1 200"), std::string::npos);
  // A client trusting another CA refuses this server.
  const std::string other = TmpDir() + "/other-job";
  ASSERT_TRUE(MakeJobCerts(other, "worker").ok());
  auto other_security = LoadSecurity(other, "worker", "");
  ASSERT_TRUE(other_security.ok()) << other_security.status();
  auto untrusted = HttpGet({"127.0.0.1", (*server)->port(), (*other_security)->ca_pem()},
                           kHealthPath);
  EXPECT_EQ(untrusted.status().code(), absl::StatusCode::kUnavailable);
  // A local probe (the container health check) may skip the check.
  HttpEndpoint probe = Local((*server)->port());
  probe.https_unverified = true;
  auto probed = HttpGet(probe, kHealthPath);
  ASSERT_TRUE(probed.ok()) << probed.status();
  EXPECT_EQ(probed->status, 200);
}

TEST(HttpServerTest, ConnectionsPastTheRequestDeadlineAreClosed) {
  HttpServerOptions options;
  options.limits.request_deadline = absl::Seconds(1);
  auto server = HttpServer::Start(options, {{"/healthz", [] { return HttpResponse{}; }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // A slowloris client: a byte of its request head every 100 ms, never the end of it.
  const int slow = ConnectFrom("127.0.0.1", port);
  ASSERT_GE(slow, 0);
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  for (int i = 0; i < 15; ++i) {
    send(slow, head.data() + (i % head.size()), 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // The next connection finds it late and closes it; that one is answered.
  EXPECT_NE(Get(port, "/healthz").find("HTTP/1.1 200"), std::string::npos);
  EXPECT_TRUE(ClosedByServer(slow, absl::Seconds(2)));
  EXPECT_GE((*server)->connections_closed_by_limits(), 1);
  close(slow);
  // A silent one is closed by the idle timeout without any other connection.
  const int idle = ConnectFrom("127.0.0.1", port);
  ASSERT_GE(idle, 0);
  EXPECT_TRUE(ClosedByServer(idle, absl::Seconds(4)));
  close(idle);
}

// 500 idle connections from 20 addresses and 50 slowloris clients from one more, all held open,
// while a prober asks /healthz 100 times: every answer comes within 100 ms.
TEST(ServeMetricsTest, HealthAnswersWithin100msWhileHostileClientsHoldTheRest) {
  // Both ends of about 1100 sockets in this process: more than a soft limit of 1024.
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 4096));
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &files), 0);
  if (files.rlim_cur < 2048) GTEST_SKIP() << "needs 2048 open files, the hard limit is lower";
  ProcessMetrics metrics("job-1", "worker", 0);
  auto server = ServeMetrics("127.0.0.1", 0, "", {metrics.Route()},
                             TransportSecurity::Plaintext());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::vector<int> held;
  for (int i = 0; i < 500; ++i) {
    const int fd = ConnectFrom(absl::StrCat("127.0.1.", 1 + i % 20).c_str(), port);
    ASSERT_GE(fd, 0) << "idle connection " << i;
    held.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::vector<int> slow;
  for (int i = 0; i < 50; ++i) {
    const int fd = ConnectFrom("127.0.2.1", port);
    ASSERT_GE(fd, 0) << "slow connection " << i;
    slow.push_back(fd);
  }
  std::thread slowloris([&] {
    const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (size_t byte = 0; !stop; ++byte) {
      for (int fd : slow) send(fd, head.data() + byte % head.size(), 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  absl::Duration slowest;
  for (int i = 0; i < 100; ++i) {
    const absl::Time start = absl::Now();
    const std::string answer = Get(port, kHealthPath);
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << "probe " << i << ": " << answer;
    EXPECT_LT(took, absl::Milliseconds(100)) << "probe " << i;
    slowest = std::max(slowest, took);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  slowloris.join();
  std::cout << "slowest /healthz of 100 beside 500 idle and 50 slowloris connections: "
            << slowest << "; closed by the limits: " << (*server)->connections_closed_by_limits()
            << "\n";
  // The slowloris peer is held to its cap, and all together to the total.
  EXPECT_GE((*server)->connections_closed_by_limits(), 50 - 32);
  EXPECT_LE((*server)->open_connections(), 512 + 1);
  for (int fd : held) close(fd);
  for (int fd : slow) close(fd);
}

TEST(ProcessMetricsTest, MetricsCarryTheProcessLabels) {
  ProcessMetrics metrics("job-1", "shard", 3);
  auto& family = prometheus::BuildCounter()
                     .Name("cohort_test_events_total")
                     .Help("events")
                     .Labels(metrics.labels())
                     .Register(metrics.registry());
  family.Add({}).Increment(2);
  auto server = HttpServer::Start({}, {metrics.Route()});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string page = Get((*server)->port(), "/metrics");
  EXPECT_NE(page.find("# TYPE cohort_test_events_total counter"), std::string::npos) << page;
  EXPECT_NE(page.find("cohort_test_events_total{host=\"" + HostName() +
                      "\",job=\"job-1\",rank=\"3\",role=\"shard\"} 2"),
            std::string::npos)
      << page;
  // What the process's security refused, by reason (none here).
  EXPECT_NE(page.find("cohort_refused_requests_total{host=\"" + HostName() +
                      "\",job=\"job-1\",rank=\"3\",role=\"shard\",reason=\"wrong_token\"} 0"),
            std::string::npos)
      << page;
}

}  // namespace
}  // namespace cohort
