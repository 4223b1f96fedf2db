#include "services/common/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "services/common/addresses.h"
#include "services/common/job_certs_testing.h"
#include "services/common/metrics.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

// The whole answer (status line, headers, body) to GET path from 127.0.0.1:port.
std::string Get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "connect failed";
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  send(fd, request.data(), request.size(), 0);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  close(fd);
  return answer;
}

TEST(HttpGetTest, FetchesABodyAndSaysWhenNothingAnswers) {
  const std::string big(100000, 'x');  // more than one read
  auto server = HttpServer::Start("127.0.0.1", 0, {{"/big", [&] {
                                                      return HttpResponse{200, "text/plain", big};
                                                    }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto got = HttpGet("127.0.0.1", port, "/big");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->content_type, "text/plain");
  EXPECT_EQ(got->body, big);
  auto missing = HttpGet("127.0.0.1", port, "/nothing");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->status, 404);
  server->reset();
  auto gone = HttpGet("127.0.0.1", port, "/big");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(gone.status().message().find(absl::StrCat("127.0.0.1:", port, "/big")),
            std::string::npos)
      << gone.status();
}

TEST(HttpServerTest, ServesEachRouteOnThePortItGot) {
  int calls = 0;
  auto server = HttpServer::Start("127.0.0.1", 0,
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

TEST(HttpServerTest, ATakenPortIsAnErrorNamingIt) {
  auto first = HttpServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = HttpServer::Start("127.0.0.1", (*first)->port(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string((*first)->port())),
            std::string::npos)
      << second.status();
}

TEST(HttpServerTest, RequestsTheGuardRefusesGet401AndNeverReachTheHandler) {
  int handled = 0;
  std::vector<std::string> seen;
  auto server = HttpServer::Start(
      "127.0.0.1", 0, {{"/status", [&] {
                          ++handled;
                          return HttpResponse{200, "application/json", "{}"};
                        }}},
      [&](absl::string_view authorization, absl::string_view peer, absl::string_view path) {
        seen.push_back(absl::StrCat(path, " ", peer.substr(0, peer.find(':'))));
        return authorization == "Bearer t0ken";
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto without = HttpGet("127.0.0.1", port, "/status");
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->status, 401);
  auto wrong = HttpGet("127.0.0.1", port, "/status", "Bearer guess");
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(handled, 0);
  auto with = HttpGet("127.0.0.1", port, "/status", "Bearer t0ken");
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->status, 200);
  EXPECT_EQ(with->body, "{}");
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(seen, std::vector<std::string>(3, "/status 127.0.0.1"));
}

TEST(ServeMetricsTest, HealthNeedsNoTokenWhereMetricsDo) {
  const std::string dir = TmpDir() + "/health-job";
  ASSERT_TRUE(MakeJobCerts(dir, "worker").ok());
  ASSERT_TRUE(WriteToken(dir + "/token", "s3cret").ok());
  auto security = LoadSecurity(dir, "worker", dir + "/token");
  ASSERT_TRUE(security.ok()) << security.status();
  ProcessMetrics metrics("job-1", "worker", 0, *security);
  auto server = ServeMetrics("127.0.0.1", 0, "", {metrics.Route()}, *security);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto health = HttpGet("127.0.0.1", port, kHealthPath);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto page = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->status, 401);
  page = HttpGet("127.0.0.1", port, "/metrics", "Bearer s3cret");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->status, 200);
}

TEST(ProcessMetricsTest, MetricsCarryTheProcessLabels) {
  ProcessMetrics metrics("job-1", "shard", 3);
  auto& family = prometheus::BuildCounter()
                     .Name("cohort_test_events_total")
                     .Help("events")
                     .Labels(metrics.labels())
                     .Register(metrics.registry());
  family.Add({}).Increment(2);
  auto server = HttpServer::Start("127.0.0.1", 0, {metrics.Route()});
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
