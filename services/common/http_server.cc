#include "services/common/http_server.h"

#include <civetweb.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cohort {

namespace {

void InitCivetweb() {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& bind, int port,
                                                             std::vector<Route> routes,
                                                             Admit admit) {
  InitCivetweb();
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(routes), std::move(admit)));
  server->served_.reserve(server->routes_.size());
  for (const Route& route : server->routes_) server->served_.push_back({server.get(), &route});
  const std::string listen = absl::StrCat(bind, ":", port);
  const char* options[] = {"listening_ports", listen.c_str(), "num_threads", "4", nullptr};
  mg_callbacks callbacks{};
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error{&error_code, error_text, sizeof(error_text)};
  mg_init_data init_data{&callbacks, server.get(), options};
  server->context_ = mg_start2(&init_data, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", listen, ": ", error_text,
                                               "; pick another --metrics_port"));
  }
  for (Served& served : server->served_) {
    // "$": the path itself, not the paths under it.
    mg_set_request_handler(server->context_, (served.route->path + "$").c_str(),
                           &HttpServer::Serve, &served);
  }
  mg_server_port ports[1] = {};
  if (mg_get_server_ports(server->context_, 1, ports) < 1) {
    return absl::InternalError(absl::StrCat("HTTP server on ", listen, " reports no port"));
  }
  server->port_ = ports[0].port;
  return server;
}

HttpServer::~HttpServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpServer::Serve(mg_connection* connection, void* served) {
  const mg_request_info* request = mg_get_request_info(connection);
  const Served& s = *static_cast<const Served*>(served);
  HttpResponse response;
  const char* authorization = mg_get_header(connection, "Authorization");
  const bool admitted =
      s.server->admit_ == nullptr ||
      s.server->admit_(authorization != nullptr ? authorization : "",
                 absl::StrCat(request->remote_addr, ":", request->remote_port), s.route->path);
  if (!admitted) {
    response = {401, "text/plain; charset=utf-8",
                "this job's pages need its token: Authorization: Bearer <token> (--token_file)\n"};
  } else if (std::string(request->request_method) != "GET") {
    response = {405, "text/plain; charset=utf-8", "only GET\n"};
  } else {
    response = s.route->handler();
  }
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
            "Connection: close\r\n\r\n",
            response.status, mg_get_response_code_text(connection, response.status),
            response.content_type.c_str(), response.body.size(),
            admitted ? "" : "WWW-Authenticate: Bearer realm=\"cohort\"\r\n");
  mg_write(connection, response.body.data(), response.body.size());
  return response.status;
}

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                     const std::string& authorization) {
  InitCivetweb();
  char error_text[256] = "";
  const std::string auth_header =
      authorization.empty() ? "" : absl::StrCat("Authorization: ", authorization, "\r\n");
  mg_connection* connection =
      mg_download(host.c_str(), port, 0, error_text, sizeof(error_text),
                  "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", path.c_str(),
                  host.c_str(), auth_header.c_str());
  if (connection == nullptr) {
    return absl::UnavailableError(
        absl::StrFormat("GET http://%s:%d%s: %s", host, port, path, error_text));
  }
  HttpResponse response;
  const mg_response_info* info = mg_get_response_info(connection);
  response.status = info->status_code;
  if (const char* type = mg_get_header(connection, "Content-Type")) response.content_type = type;
  char buffer[16384];
  for (int n; (n = mg_read(connection, buffer, sizeof(buffer))) > 0;) response.body.append(buffer, n);
  mg_close_connection(connection);
  return response;
}

}  // namespace cohort
