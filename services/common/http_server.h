#ifndef COHORT_SERVICES_COMMON_HTTP_SERVER_H_
#define COHORT_SERVICES_COMMON_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace cohort {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// A process's small HTTP server (civetweb): /metrics on every role, /status on the scheduler.
// Each path answers GET with what its handler returns; handlers run on the server's threads.
class HttpServer {
 public:
  struct Route {
    std::string path;  // "/metrics"
    std::function<HttpResponse()> handler;
  };

  // Listens on bind:port (port 0: one the system picks; port() tells which).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& bind, int port,
                                                           std::vector<Route> routes);
  ~HttpServer();  // stops serving; handlers are not called after it returns
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  explicit HttpServer(std::vector<Route> routes) : routes_(std::move(routes)) {}
  static int Serve(mg_connection* connection, void* route);

  std::vector<Route> routes_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

// GET http://host:port/path (the client side, for `launch --status`): the status code and body;
// Unavailable, naming the address, when nothing answers there.
absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path);

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_HTTP_SERVER_H_
