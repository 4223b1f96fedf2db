// The HTTP request path of every role's port: the bytes a peer sends (libmicrohttpd's parser,
// the routes, the token check, the connection limits), sent over loopback to a live server.
// Whatever arrives, the answers are HTTP, a 200 for a page behind the token comes only with the
// token, and the next request on a new connection is still answered.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "services/common/http_server.h"

namespace {

constexpr char kToken[] = "Bearer t0k3n";

cohort::HttpServer& Server() {
  static cohort::HttpServer* server = [] {
    auto started = cohort::HttpServer::Start(
        {},
        {{"/metrics", [] { return cohort::HttpResponse{200, "text/plain", "m 1\n"}; }},
         {"/status", [] { return cohort::HttpResponse{200, "application/json", "{}"}; }},
         {"/healthz", [] { return cohort::HttpResponse{200, "text/plain", "ok\n"}; }}},
        [](absl::string_view authorization, absl::string_view, absl::string_view path) {
          return path == "/healthz" || authorization == kToken;
        });
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", std::string(started.status().message()).c_str());
      std::abort();
    }
    return started->release();
  }();
  return *server;
}

// Sends bytes on a new connection, ends its writing side, and returns what comes back until the
// server closes it or is silent for `silence` (it waits out its idle timeout on a request head
// cut short, which a fuzzer need not).
std::string Exchange(absl::string_view bytes, int silence_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(Server().port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) std::abort();
  timeval timeout{silence_ms / 1000, (silence_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early on a bad request
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  close(fd);
  return answer;
}

size_t Count(absl::string_view text, absl::string_view what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != absl::string_view::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view request(reinterpret_cast<const char*>(data), size);
  const std::string answer = Exchange(request, 50);
  if (!answer.empty() && !absl::StartsWith(answer, "HTTP/1.")) std::abort();
  // Every page answered 200 was /healthz or came with the token.
  if (Count(answer, " 200 OK\r\n") > Count(request, "/healthz") + Count(request, kToken)) {
    std::abort();
  }
  const std::string health = Exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 10000);
  if (!absl::StartsWith(health, "HTTP/1.1 200")) std::abort();
  return 0;
}
