#include "tools/launch/credentials.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/common/durable_file.h"
#include "trainer/io/whole_file.h"
#include "tools/launch/child_process.h"
#include "tools/launch/remote.h"

namespace cohort::launch {

absl::Status MakeCredentials(LaunchOptions& o, const std::string& scratch_dir) {
  if (!o.tls) return absl::OkStatus();
  if (o.tls_dir.empty()) {
    o.tls_dir = absl::StrCat(scratch_dir, "/tls");
    SpawnOptions make;
    make.path = o.make_job_certs;
    make.argv = {o.make_job_certs, o.tls_dir, "scheduler", "shard", "worker"};
    make.env = o.environment;
    absl::StatusOr<CompletedProcess> made = RunToCompletion(make, absl::Seconds(60));
    if (!made.ok()) return made.status();
    if (made->wait_status != 0) {
      return absl::InternalError(absl::StrCat("making the job's TLS certificates with ",
                                              o.make_job_certs, " failed: ", made->output));
    }
  }
  if (o.token_file.empty()) {
    std::random_device random;
    std::string token;
    for (int i = 0; i < 8; ++i) absl::StrAppendFormat(&token, "%08x", random());
    o.token_file = absl::StrCat(scratch_dir, "/token");
    if (absl::Status s = WriteSecretFile(o.token_file, token + "\n"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadRunDirFiles(
    const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::string, std::string>> contents;
  for (const auto& [name, path] : files) {
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) return text.status();
    contents.emplace_back(name, *std::move(text));
  }
  return RunDirFiles(contents);
}

}  // namespace cohort::launch
