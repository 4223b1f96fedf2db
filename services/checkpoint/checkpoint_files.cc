#include "services/checkpoint/checkpoint_files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

absl::Status SyncFolder(const std::string& folder) {
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open", folder);
  const int rc = fsync(fd);
  close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("fsync", folder);
}

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " is missing"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A manifest's JSON, checked field by field (no exceptions: a damaged file is an error).
absl::StatusOr<Manifest> ParseManifest(const std::string& text) {
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

}  // namespace

absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create", temp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const absl::Status s = Errno("write", temp);  // ENOSPC says "No space left on device"
      close(fd);
      unlink(temp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const absl::Status s = Errno("fsync", temp);
    close(fd);
    unlink(temp.c_str());
    return s;
  }
  close(fd);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const absl::Status s = Errno("rename to", path);
    unlink(temp.c_str());
    return s;
  }
  return SyncFolder(fs::path(path).parent_path().string());
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
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", folder, ": ", error.message()));
  }
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& [name, bytes] : files) {
    if (absl::Status s = WriteFileDurably(absl::StrCat(folder, "/", name), bytes); !s.ok()) {
      return s;
    }
    listed.push_back({{"file", name},
                      {"bytes", static_cast<int64_t>(bytes.size())},
                      {"sha256", Sha256Hex(bytes)}});
  }
  const nlohmann::json manifest = {
      {"version", version}, {"files", listed}, {"metadata", metadata}};
  return WriteFileDurably(absl::StrCat(folder, "/", manifest_name), manifest.dump(1) + "\n");
}

absl::StatusOr<Manifest> VerifyManifest(const std::string& root, int64_t version,
                                        const std::string& manifest_name) {
  const std::string folder = CheckpointFolder(root, version);
  const std::string manifest_path = absl::StrCat(folder, "/", manifest_name);
  absl::StatusOr<std::string> text = ReadWhole(manifest_path);
  if (!text.ok()) return text.status();
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
    absl::StatusOr<std::string> bytes = ReadWhole(path);
    if (!bytes.ok()) return absl::DataLossError(bytes.status().message());
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
    const std::string& root, const std::vector<std::string>& manifest_names) {
  LatestCheckpoint latest;
  for (int64_t version : CheckpointVersions(root)) {
    latest.manifests.clear();
    absl::Status damage;
    for (const std::string& name : manifest_names) {
      absl::StatusOr<Manifest> m = VerifyManifest(root, version, name);
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
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint in ", root,
                                          latest.refused.empty() ? "" : " (",
                                          absl::StrJoin(latest.refused, "; "),
                                          latest.refused.empty() ? "" : ")"));
}

absl::Status PruneCheckpoints(const std::string& root,
                              const std::vector<std::string>& manifest_names, int keep) {
  int complete = 0;
  for (int64_t version : CheckpointVersions(root)) {
    if (complete < keep) {
      bool whole = true;
      for (const std::string& name : manifest_names) {
        whole = whole && VerifyManifest(root, version, name).ok();
      }
      if (whole) ++complete;
      continue;
    }
    std::error_code error;
    fs::remove_all(CheckpointFolder(root, version), error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot remove ", CheckpointFolder(root, version),
                                              ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort
