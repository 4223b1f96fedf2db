#ifndef COHORT_SERVICES_COMMON_HTTP_SERVER_H_
#define COHORT_SERVICES_COMMON_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct mg_context;
struct mg_connection;

namespace cohort {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// A process's small HTTP server (civetweb): /metrics on every role, /status on the scheduler.
// Each path answers GET with what its handler returns, to the requests `admit` lets through
// (others get 401); handlers run on the server's threads.
class HttpServer {
 public:
  struct Route {
    std::string path;  // "/metrics"
    std::function<HttpResponse()> handler;
  };
  // Whether a request with this Authorization header ("" when none), from peer "address:port",
  // for path may be answered. Null: every request.
  using Admit = std::function<bool(absl::string_view authorization, absl::string_view peer,
                                   absl::string_view path)>;

  // Listens on bind:port (port 0: one the system picks; port() tells which).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& bind, int port,
                                                           std::vector<Route> routes,
                                                           Admit admit = nullptr);
  ~HttpServer();  // stops serving; handlers are not called after it returns
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  struct Served {  // what a request handler is given
    const HttpServer* server;
    const Route* route;
  };
  HttpServer(std::vector<Route> routes, Admit admit)
      : routes_(std::move(routes)), admit_(std::move(admit)) {}
  static int Serve(mg_connection* connection, void* served);

  std::vector<Route> routes_;
  Admit admit_;
  std::vector<Served> served_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

// GET http://host:port/path (the client side, for `launch --status`), with an Authorization
// header when one is given ("Bearer <token>"): the status code and body; Unavailable, naming
// the address, when nothing answers there.
absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                     const std::string& authorization = "");

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_HTTP_SERVER_H_
