#include "tools/launch/status_table.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/common/http_server.h"
#include "services/common/count_text.h"
#include "services/common/log_safe.h"
#include "trainer/io/whole_file.h"
#include "trainer/loop/progress_log.h"

namespace cohort::launch {

namespace {

// A string field of the page, escaped: whatever answered at that address, it cannot drive the
// terminal.
std::string Text(const nlohmann::json& object, const char* key, const char* otherwise,
                 size_t max_bytes = 256) {
  const nlohmann::json::const_iterator it = object.find(key);
  return LogSafe(it != object.end() && it->is_string() ? it->get<std::string>() : otherwise,
                 max_bytes);
}

// An integer field of the page; 0 when it is missing or not an integer.
int64_t Integer(const nlohmann::json& object, const char* key) {
  const nlohmann::json::const_iterator it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

absl::StatusOr<std::string> StatusTable(const std::string& status_json) {
  const nlohmann::json j = nlohmann::json::parse(status_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("members") || !j.contains("state")) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a scheduler's status page: '", LogSafe(status_json, 80), "'"));
  }
  std::string out = absl::StrFormat(
      "job %s: %s, %s, %s, %s, %.0f s; %.1f img/s\n",
      Text(j, "job_id", "?"), Text(j, "state", "?"), Count(j.value("num_workers", 0), "worker"),
      Count(j.value("num_shards", 0), "shard"), Text(j, "mode", "?"), j.value("seconds_since_start", 0.0),
      j.value("images_per_second", 0.0));
  if (const int64_t total = Integer(j, "total_steps"); total > 0) {
    const nlohmann::json::const_iterator eta = j.find("eta_seconds");
    const nlohmann::json::const_iterator top1 = j.find("test_top1");
    absl::StrAppend(
        &out, absl::StrFormat("  step %d of %d, ETA %s", Integer(j, "step"), total,
                              DurationText(eta != j.end() && eta->is_number() ? eta->get<double>()
                                                                              : -1)));
    if (top1 != j.end() && top1->is_number()) {
      absl::StrAppend(&out, absl::StrFormat(", test top-1 %.2f%%", top1->get<double>()));
    }
    absl::StrAppend(&out, "\n");
  }
  if (const std::string reason = Text(j, "reason", "", 4096); !reason.empty()) {
    absl::StrAppend(&out, "  ", reason, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("%-7s %4s %-8s %-16s %8s %5s %9s %8s %6s %8s %9s\n", "ROLE",
                                        "RANK", "STATE", "HOST", "STEP", "EPOCH", "IMG/S",
                                        "STEP_MS", "COMM%", "LOSS", "HEARTBEAT"));
  for (const nlohmann::json& m : j["members"]) {
    const double since = m.value("seconds_since_heartbeat", -1.0);
    const std::string heartbeat = since < 0 ? "-" : absl::StrFormat("%.1f s", since);
    std::string progress = absl::StrFormat("%8s %5s %9s %8s %6s %8s", "-", "-", "-", "-", "-", "-");
    if (m.contains("progress")) {
      const nlohmann::json& p = m["progress"];
      progress = absl::StrFormat("%8d %5d %9.1f %8.1f %6.1f %8.4f", p.value("step", int64_t{0}),
                                 p.value("epoch", int64_t{0}), p.value("images_per_second", 0.0),
                                 1000 * p.value("step_seconds", 0.0),
                                 100 * p.value("communication_overhead", 0.0), p.value("loss", 0.0));
    }
    absl::StrAppend(&out, absl::StrFormat("%-7s %4d %-8s %-16s %s %9s\n", Text(m, "role", "?"),
                                          m.value("rank", -1), Text(m, "state", "?"),
                                          Text(m, "host", ""), progress, heartbeat));
    if (const std::string error = Text(m, "last_error", "", 4096); !error.empty()) {
      absl::StrAppend(&out, "        error: ", error, "\n");
    }
  }
  return out;
}

absl::StatusOr<std::string> FetchStatusTable(const std::string& address,
                                             const std::string& token_file,
                                             const std::string& tls_dir) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--status '", address, "': expected HOST:PORT"));
  }
  std::string authorization;
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadWholeFile(token_file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--token_file: ", token.status().message()));
    }
    authorization = absl::StrCat("Bearer ", absl::StripAsciiWhitespace(*token));
  }
  HttpEndpoint scheduler{address.substr(0, colon), port};
  if (!tls_dir.empty()) {
    absl::StatusOr<std::string> ca = ReadWholeFile(tls_dir + "/ca.pem");
    if (!ca.ok() || ca->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_dir: ", ca.ok() ? tls_dir + "/ca.pem is empty" : ca.status().message(),
          " (the job's ca.pem)"));
    }
    scheduler.ca_pem = *std::move(ca);
  } else if (!token_file.empty()) {
    return absl::InvalidArgumentError(
        "a job with a token serves /status over HTTPS only: give --tls_dir DIR, the folder "
        "with the job's ca.pem");
  }
  absl::StatusOr<HttpResponse> page = HttpGet(scheduler, "/status", authorization);
  if (!page.ok()) {
    return absl::UnavailableError(absl::StrCat(
        page.status().message(),
        tls_dir.empty() ? " (is the scheduler running, or lingering with --linger? A TLS job "
                          "serves HTTPS: give --tls_dir and --token_file)"
                        : " (is the scheduler running, or lingering with --linger? Is --tls_dir "
                          "that job's?)"));
  }
  if (page->status == 401) {
    return absl::UnauthenticatedError(
        absl::StrCat(address, "/status needs the job's token: give ",
                     token_file.empty() ? "--token_file FILE" : "the right --token_file"));
  }
  if (page->status != 200) {
    return absl::FailedPreconditionError(absl::StrCat(address, "/status answered ", page->status,
                                                      "; is that a Cohort scheduler's metrics "
                                                      "port?"));
  }
  absl::StatusOr<std::string> table = StatusTable(page->body);
  if (!table.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(address, ": ", table.status().message()));
  }
  return table;
}

}  // namespace cohort::launch
