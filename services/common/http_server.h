#ifndef COHORT_SERVICES_COMMON_HTTP_SERVER_H_
#define COHORT_SERVICES_COMMON_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "services/common/connection_limiter.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace cohort {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

struct HttpServerOptions {
  std::string bind = "127.0.0.1";
  int port = 0;  // 0: one the system picks (HttpServer::port() tells which)
  // Both set (PEM): HTTPS only, a plaintext request is refused in the handshake. Both empty:
  // plain HTTP.
  std::string certificate_pem;
  std::string key_pem;
  ConnectionLimits limits;
};

// A process's small HTTP server (libmicrohttpd, event-driven): /metrics on every role, /status
// on the scheduler. Each path answers GET with what its handler returns, to the requests
// `admit` lets through (others get 401). Idle, slow and many connections cannot starve it: it
// holds connections in two event loops rather than a thread each, and closes those the limits
// pick (ConnectionLimiter). Handlers run on the event loops' threads and must be quick.
class HttpServer {
 public:
  struct Route {
    std::string path;  // "/metrics"
    std::function<HttpResponse()> handler;
    // Answered without the token (ServeMetrics): only for what holds no data of the job, as
    // /healthz and the job page's HTML (it reads its data from the token-checked pages).
    bool open = false;
  };
  // Whether a request with this Authorization header ("" when none), from peer "address:port",
  // for path may be answered. Null: every request.
  using Admit = std::function<bool(absl::string_view authorization, absl::string_view peer,
                                   absl::string_view path)>;

  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           std::vector<Route> routes,
                                                           Admit admit = nullptr);
  ~HttpServer();  // stops serving; handlers are not called after it returns
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  bool https() const { return https_; }
  const char* scheme() const { return https_ ? "https" : "http"; }  // for "scheme://host:port"
  int open_connections() const;
  int64_t connections_closed_by_limits() const;  // since start

 private:
  HttpServer(std::vector<Route> routes, Admit admit, const ConnectionLimits& limits, bool https)
      : routes_(std::move(routes)), admit_(std::move(admit)), limiter_(limits), https_(https) {}
  friend struct HttpServerCallbacks;  // libmicrohttpd's, in http_server.cc
  // The answer to method url; *admitted says whether admit_ let it through.
  HttpResponse Respond(MHD_Connection* connection, absl::string_view url,
                       absl::string_view method, bool* admitted) const;

  const std::vector<Route> routes_;
  const Admit admit_;
  mutable absl::Mutex mu_;
  ConnectionLimiter limiter_ ABSL_GUARDED_BY(mu_);
  const bool https_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

// Where a client finds a role's HTTP server.
struct HttpEndpoint {
  std::string host;
  int port = 0;
  // Empty: plain HTTP. Else HTTPS, the server's certificate checked against this CA (PEM) for
  // the job-wide name "cohort", whatever host it is reached at.
  std::string ca_pem;
  bool https_unverified = false;  // HTTPS without checking the certificate (local probes only)
};

// GET path from endpoint (the client side, for `launch --status` and the container health
// check), with an Authorization header when one is given ("Bearer <token>"): the status code
// and body; Unavailable, naming the address, when nothing answers there in 10 s.
absl::StatusOr<HttpResponse> HttpGet(const HttpEndpoint& endpoint, const std::string& path,
                                     const std::string& authorization = "");

}  // namespace cohort

#endif  // COHORT_SERVICES_COMMON_HTTP_SERVER_H_
