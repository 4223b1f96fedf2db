#include "services/common/http_server.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "services/common/clock.h"
#include "absl/strings/str_format.h"
#include "services/common/listen_socket.h"

namespace cohort {

namespace {


const sockaddr* ClientAddress(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info != nullptr ? info->client_addr : nullptr;
}

}  // namespace

// libmicrohttpd calls these on its event loops' threads.
struct HttpServerCallbacks {
  static MHD_Result Answer(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* /*version*/,
                           const char* /*upload_data*/, size_t* upload_data_size,
                           void** /*request*/) {
    auto* server = static_cast<HttpServer*>(cls);
    {
      absl::MutexLock lock(&server->mu_);
      server->limiter_.Asked(connection);
    }
    *upload_data_size = 0;  // a body, if any, is not read: every answer is given now
    bool admitted = true;
    const HttpResponse answer = server->Respond(connection, url, method, &admitted);
    MHD_Response* response = MHD_create_response_from_buffer(
        answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type.c_str());
    if (!admitted) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                              "Bearer realm=\"cohort\"");
    }
    const MHD_Result queued = MHD_queue_response(connection, answer.status, response);
    MHD_destroy_response(response);
    return queued;
  }

  static void Completed(void* cls, MHD_Connection* connection, void** /*request*/,
                        MHD_RequestTerminationCode /*why*/) {
    auto* server = static_cast<HttpServer*>(cls);
    absl::MutexLock lock(&server->mu_);
    server->limiter_.Answered(connection, SteadyNow());
  }

  static void Notify(void* cls, MHD_Connection* connection, void** /*socket_context*/,
                     MHD_ConnectionNotificationCode what) {
    auto* server = static_cast<HttpServer*>(cls);
    absl::MutexLock lock(&server->mu_);
    if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
      server->limiter_.Closed(connection);
      return;
    }
    const sockaddr* address = ClientAddress(connection);
    for (ConnectionLimiter::Id id : server->limiter_.Opened(
             connection, address != nullptr ? SocketAddressText(address, false) : "?", SteadyNow())) {
      // Safe under mu_: libmicrohttpd 0.9.75 reports a connection closed (Closed, which waits
      // for mu_) before it closes its socket, so the descriptor cannot have been reused yet.
      auto* closing = static_cast<MHD_Connection*>(const_cast<void*>(id));
      const MHD_ConnectionInfo* fd =
          MHD_get_connection_info(closing, MHD_CONNECTION_INFO_CONNECTION_FD);
      if (fd != nullptr) shutdown(fd->connect_fd, SHUT_RDWR);
    }
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                             std::vector<Route> routes,
                                                             Admit admit) {
  const std::string listen = absl::StrCat(options.bind, ":", options.port);
  const bool https = !options.certificate_pem.empty() || !options.key_pem.empty();
  if (https && (options.certificate_pem.empty() || options.key_pem.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTPS on ", listen, " needs both a certificate and its key"));
  }
  if (https && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return absl::FailedPreconditionError(
        "this libmicrohttpd has no TLS: install Debian's libmicrohttpd12 (tools/install_deps.sh)");
  }
  absl::StatusOr<ListenSocket> socket = ListenSocket::Open(options.bind, options.port);
  if (!socket.ok()) {
    return absl::UnavailableError(absl::StrCat(socket.status().message(), " (--metrics_port)"));
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(routes), std::move(admit), options.limits, https));
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
  if (https) flags |= MHD_USE_TLS;
  // The limiter closes connections first; libmicrohttpd's own limit only bounds the moment
  // between a connection opening and one it replaces closing.
  const unsigned hard_limit = 2u * static_cast<unsigned>(options.limits.max_connections) + 16u;
  const unsigned idle_seconds = static_cast<unsigned>(
      std::max(1.0, std::ceil(absl::ToDoubleSeconds(options.limits.request_deadline))));
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, socket->fd(), nullptr},
      {MHD_OPTION_THREAD_POOL_SIZE, 2, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, hard_limit, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, idle_seconds, nullptr},
      {MHD_OPTION_NOTIFY_CONNECTION,
       reinterpret_cast<intptr_t>(&HttpServerCallbacks::Notify), server.get()},
      {MHD_OPTION_NOTIFY_COMPLETED,
       reinterpret_cast<intptr_t>(&HttpServerCallbacks::Completed), server.get()},
  };
  if (https) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0,
                     const_cast<char*>(options.certificate_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(options.key_pem.c_str())});
    items.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0,
                     const_cast<char*>("SECURE128:-VERS-TLS1.0:-VERS-TLS1.1:-VERS-DTLS-ALL")});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  server->daemon_ =
      MHD_start_daemon(flags, 0, nullptr, nullptr, &HttpServerCallbacks::Answer, server.get(),
                       MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve ", https ? "HTTPS" : "HTTP", " on ", listen,
        https ? ": the certificate or its key is not PEM" : ": libmicrohttpd would not start"));
  }
  server->port_ = socket->port();
  socket->Release();  // the daemon closes it when it stops
  return server;
}

HttpServer::~HttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

int HttpServer::open_connections() const {
  absl::MutexLock lock(&mu_);
  return limiter_.open();
}

int64_t HttpServer::connections_closed_by_limits() const {
  absl::MutexLock lock(&mu_);
  return limiter_.closed_by_limits();
}

HttpResponse HttpServer::Respond(MHD_Connection* connection, absl::string_view url,
                                 absl::string_view method, bool* admitted) const {
  const auto route = std::find_if(routes_.begin(), routes_.end(),
                                  [&](const Route& r) { return r.path == url; });
  if (route == routes_.end()) return {404, "text/plain; charset=utf-8", "not found\n"};
  const char* authorization =
      MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  const sockaddr* address = ClientAddress(connection);
  *admitted = admit_ == nullptr ||
              admit_(authorization != nullptr ? authorization : "",
                     address != nullptr ? SocketAddressText(address, true) : "?", route->path);
  if (!*admitted) {
    return {401, "text/plain; charset=utf-8",
            "this job's pages need its token: Authorization: Bearer <token> (--token_file)\n"};
  }
  if (method != "GET") return {405, "text/plain; charset=utf-8", "only GET\n"};
  return route->handler();
}

namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

void InitCurl() {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(const HttpEndpoint& endpoint, const std::string& path,
                                     const std::string& authorization) {
  InitCurl();
  const bool https = !endpoint.ca_pem.empty() || endpoint.https_unverified;
  const std::string host =
      endpoint.host.find(':') != std::string::npos && endpoint.host[0] != '['
          ? absl::StrCat("[", endpoint.host, "]")
          : endpoint.host;
  const std::string address = absl::StrCat(host, ":", endpoint.port);
  // Verified HTTPS asks for the job-wide name and connects to the real address.
  const std::string url = absl::StrCat(https ? "https://" : "http://",
                                       https && !endpoint.https_unverified ? "cohort" : host, ":",
                                       endpoint.port, path);
  const std::string shown = absl::StrCat(https ? "https://" : "http://", address, path);
  char error[CURL_ERROR_SIZE] = "";  // outlives the handle, which writes to it
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (curl == nullptr) return absl::ResourceExhaustedError("GET " + shown + ": no curl handle");
  HttpResponse response;
  curl_slist* headers = nullptr;
  if (!authorization.empty()) {
    headers = curl_slist_append(headers, absl::StrCat("Authorization: ", authorization).c_str());
  }
  curl_slist* connect_to = curl_slist_append(
      nullptr, absl::StrCat("cohort:", endpoint.port, ":", host, ":", endpoint.port).c_str());
  curl_blob ca{const_cast<char*>(endpoint.ca_pem.data()), endpoint.ca_pem.size(),
               CURL_BLOB_COPY};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECT_TO, connect_to);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // never through a proxy from the environment
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  if (https && endpoint.https_unverified) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (https) {
    curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
  }
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  const CURLcode result = curl_easy_perform(c);
  curl_slist_free_all(headers);
  curl_slist_free_all(connect_to);
  if (result != CURLE_OK) {
    return absl::UnavailableError(absl::StrFormat(
        "GET %s: %s", shown, error[0] != '\0' ? error : curl_easy_strerror(result)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  if (char* type = nullptr; curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type) == CURLE_OK &&
                            type != nullptr) {
    response.content_type = type;
  }
  return response;
}

}  // namespace cohort
