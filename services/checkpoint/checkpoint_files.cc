#include "services/checkpoint/checkpoint_files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/common/durable_file.h"
#include "trainer/io/whole_file.h"
#include "trainer/base/status_macros.h"

namespace cohort {

namespace fs = std::filesystem;

absl::StatusOr<Manifest> ParseManifest(absl::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const absl::Status bad = absl::DataLossError("is not a manifest");
  if (j.is_discarded() || !j.is_object() || !j.contains("version") ||
      !j["version"].is_number_integer() || !j.contains("files") || !j["files"].is_array() ||
      !j.contains("metadata") || !j["metadata"].is_object()) {
    return bad;
  }
  Manifest m;
  m.version = j["version"].get<int64_t>();
  for (const nlohmann::json& f : j["files"]) {
    if (!f.is_object() || !f.contains("file") || !f["file"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_integer() || !f.contains("sha256") || !f["sha256"].is_string()) {
      return bad;
    }
    const std::string name = f["file"].get<std::string>();
    if (name.empty() || name == "." || name == ".." || absl::StrContains(name, '/')) return bad;
    m.files.push_back({name, f["bytes"].get<int64_t>(), f["sha256"].get<std::string>()});
  }
  for (const auto& [key, value] : j["metadata"].items()) {
    if (!value.is_string()) return bad;
    m.metadata[key] = value.get<std::string>();
  }
  return m;
}

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

std::string CheckpointFolder(const std::string& root, int64_t version) {
  return absl::StrFormat("%s/v%012d", root, version);
}

absl::Status WriteCheckpointFiles(const std::string& root, int64_t version,
                                  const std::string& manifest_name,
                                  const std::map<std::string, std::string>& files,
                                  const std::map<std::string, std::string>& metadata) {
  const std::string folder = CheckpointFolder(root, version);
  // Another writer clearing the steps it undid removes the folders it leaves empty: one
  // created here a moment before is created again.
  const auto write = [&folder](const std::string& name, absl::string_view bytes) {
    absl::Status written;
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::error_code error;
      fs::create_directories(folder, error);
      if (error) {
        return absl::InternalError(absl::StrCat("cannot create ", folder, ": ", error.message()));
      }
      written = WriteFileDurably(absl::StrCat(folder, "/", name), bytes);
      if (written.ok() || fs::exists(folder, error)) break;
    }
    return written;
  };
  // A write that fails (a full disk) takes back what it wrote, so that its files hold no
  // space and the folder does not stay empty.
  std::vector<std::string> written;
  const auto take_back = [&](absl::Status failure) {
    std::error_code ignored;
    for (const std::string& name : written) fs::remove(absl::StrCat(folder, "/", name), ignored);
    fs::remove(folder, ignored);  // only when empty: other writers' files stay
    return failure;
  };
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& [name, bytes] : files) {
    if (absl::Status s = write(name, bytes); !s.ok()) return take_back(s);
    written.push_back(name);
    listed.push_back({{"file", name},
                      {"bytes", static_cast<int64_t>(bytes.size())},
                      {"sha256", Sha256Hex(bytes)}});
  }
  const nlohmann::json manifest = {
      {"version", version}, {"files", listed}, {"metadata", metadata}};
  if (absl::Status s = write(manifest_name, manifest.dump(1) + "\n"); !s.ok()) {
    return take_back(s);
  }
  return absl::OkStatus();
}

absl::StatusOr<Manifest> VerifyManifest(const std::string& root, int64_t version,
                                        const std::string& manifest_name, Check check) {
  const std::string folder = CheckpointFolder(root, version);
  const std::string manifest_path = absl::StrCat(folder, "/", manifest_name);
  absl::StatusOr<std::string> text = ReadWholeFile(manifest_path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat(manifest_path, " is missing"));
  absl::StatusOr<Manifest> parsed = ParseManifest(*text);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat(manifest_path, " ", parsed.status().message()));
  }
  Manifest m = *std::move(parsed);
  if (m.version != version) {
    return absl::DataLossError(absl::StrCat(manifest_path, " is of version ", m.version,
                                            ", in the folder of version ", version));
  }
  for (const ManifestEntry& f : m.files) {
    const std::string path = absl::StrCat(folder, "/", f.file);
    if (check == Check::kSizes) {
      std::error_code error;
      const uintmax_t size = fs::file_size(path, error);
      if (error) return absl::DataLossError(absl::StrCat(path, " is missing"));
      if (static_cast<int64_t>(size) != f.bytes) {
        return absl::DataLossError(absl::StrCat(path, " has ", size, " bytes; ", manifest_name,
                                                " says ", f.bytes));
      }
      continue;
    }
    absl::StatusOr<std::string> bytes = ReadWholeFile(path);
    if (!bytes.ok()) return absl::DataLossError(absl::StrCat(path, " is missing"));
    if (static_cast<int64_t>(bytes->size()) != f.bytes) {
      return absl::DataLossError(absl::StrCat(path, " has ", bytes->size(), " bytes; ",
                                              manifest_name, " says ", f.bytes));
    }
    if (Sha256Hex(*bytes) != f.sha256) {
      return absl::DataLossError(
          absl::StrCat(path, " does not match its checksum in ", manifest_name));
    }
  }
  return m;
}

std::vector<int64_t> CheckpointVersions(const std::string& root) {
  std::vector<int64_t> versions;
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator(root, error)) {
    const std::string name = e.path().filename().string();
    int64_t version = 0;
    if (e.is_directory() && absl::StartsWith(name, "v") && name.size() == 13 &&
        absl::SimpleAtoi(name.substr(1), &version)) {
      versions.push_back(version);
    }
  }
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

absl::StatusOr<LatestCheckpoint> FindLatestCheckpoint(
    const std::string& root, const std::vector<std::string>& manifest_names, Check check) {
  LatestCheckpoint latest;
  for (int64_t version : CheckpointVersions(root)) {
    latest.manifests.clear();
    absl::Status damage;
    for (const std::string& name : manifest_names) {
      absl::StatusOr<Manifest> m = VerifyManifest(root, version, name, check);
      if (!m.ok()) {
        damage = m.status();
        break;
      }
      latest.manifests.push_back(*std::move(m));
    }
    if (damage.ok()) {
      latest.version = version;
      return latest;
    }
    latest.refused.push_back(absl::StrCat("checkpoint ", CheckpointFolder(root, version),
                                          " is not usable: ", damage.message()));
    if (absl::IsDataLoss(damage)) latest.damaged.push_back(version);
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint in ", root,
                                          latest.refused.empty() ? "" : " (",
                                          absl::StrJoin(latest.refused, "; "),
                                          latest.refused.empty() ? "" : ")"));
}

absl::StatusOr<std::optional<std::string>> SetCheckpointAsideIfDamaged(
    const std::string& root, int64_t version, const std::vector<std::string>& manifest_names) {
  const std::string lock_path = absl::StrCat(root, "/.set-aside.lock");
  const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", lock_path, ": ", strerror(errno)));
  }
  const auto unlock = absl::MakeCleanup([lock] { close(lock); });  // and its flock with it
  if (flock(lock, LOCK_EX) != 0) {
    return absl::InternalError(absl::StrCat("cannot lock ", lock_path, ": ", strerror(errno)));
  }
  bool damaged = false;
  for (const std::string& name : manifest_names) {
    damaged = damaged || absl::IsDataLoss(VerifyManifest(root, version, name).status());
  }
  if (!damaged) return std::optional<std::string>();
  const std::string folder = CheckpointFolder(root, version);
  for (int n = 1; n <= 100; ++n) {
    const std::string aside =
        n == 1 ? absl::StrCat(folder, ".damaged") : absl::StrCat(folder, ".damaged-", n);
    std::error_code error;
    if (fs::exists(aside, error)) continue;  // rename(2) would replace an empty folder
    fs::rename(folder, aside, error);
    if (!error) return std::optional<std::string>(aside);
    if (error != std::errc::directory_not_empty && error != std::errc::file_exists) {
      return absl::InternalError(
          absl::StrCat("cannot set ", folder, " aside as ", aside, ": ", error.message()));
    }
  }
  return absl::InternalError(absl::StrCat("cannot set ", folder,
                                          " aside: 100 folders of damaged copies are there "
                                          "already; remove those looked at"));
}

absl::Status PruneCheckpoints(const std::string& root,
                              const std::vector<std::string>& manifest_names, int keep) {
  int complete = 0;
  for (int64_t version : CheckpointVersions(root)) {
    if (complete < keep) {
      bool whole = true;
      for (const std::string& name : manifest_names) {
        whole = whole && VerifyManifest(root, version, name, Check::kSizes).ok();
      }
      if (whole) ++complete;
      continue;
    }
    // Another shard may be removing the same folder: an entry gone under our feet is no
    // error, and what is left is removed on the next try.
    std::error_code error;
    for (int tries = 0; tries < 10; ++tries) {
      fs::remove_all(CheckpointFolder(root, version), error);
      if (error != std::errc::no_such_file_or_directory) break;
    }
    if (error && fs::exists(CheckpointFolder(root, version))) {
      return absl::InternalError(absl::StrCat("cannot remove ", CheckpointFolder(root, version),
                                              ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
