#include "trainer/data/record_packer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "trainer/io/whole_file.h"
#include "trainer/data/recordio.h"
#include "trainer/data/tfrecord.h"
#include "trainer/loop/progress_log.h"

namespace cohort {

namespace {

// Fisher-Yates on mt19937_64, whose sequence the standard fixes (std::shuffle's is not).
std::vector<size_t> ShuffledOrder(size_t n, uint64_t seed) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 random(seed);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[random() % i]);
  return order;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PackRecords(const ImageList& list,
                                                     const PackOptions& options,
                                                     std::ostream& progress, int64_t every) {
  if (options.prefix.empty()) return absl::InvalidArgumentError("give the shards' prefix");
  if (options.shard_bytes <= 0) {
    return absl::InvalidArgumentError("the shard size must be positive");
  }
  // The shards' folder is made if it is not there.
  std::error_code made;
  const std::filesystem::path folder = std::filesystem::path(options.prefix).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder, made);
  if (made) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make the shards' folder ", folder.string(), ": ", made.message()));
  }
  std::vector<std::string> shards;
  std::ofstream rec, idx;
  int64_t in_shard = 0;
  const auto close_shard = [&]() -> absl::Status {
    if (!rec.is_open()) return absl::OkStatus();
    rec.close();
    if (idx.is_open()) idx.close();
    if (!rec || !idx) {
      return absl::DataLossError(absl::StrCat("cannot write ", shards.back(), " (disk full?)"));
    }
    return absl::OkStatus();
  };
  const bool recordio = options.format == RecordFormat::kRecordIO;
  const absl::Time start = absl::Now();
  std::vector<size_t> order = ShuffledOrder(list.images.size(), options.seed);
  if (!options.shuffle) std::sort(order.begin(), order.end());
  for (size_t n = 0; n < order.size(); ++n) {
    const ImageList::Entry& entry = list.images[order[n]];
    if (!rec.is_open()) {
      const std::string base = absl::StrFormat("%s-%05d", options.prefix, shards.size());
      shards.push_back(base + (recordio ? ".rec" : ".tfrecord"));
      rec.open(shards.back(), std::ios::binary | std::ios::trunc);
      if (recordio) idx.open(base + ".idx", std::ios::trunc);
      if (!rec || !idx) {
        return absl::PermissionDeniedError(absl::StrCat("cannot create ", shards.back()));
      }
      in_shard = 0;
    }
    absl::StatusOr<std::string> image = ReadWholeFile(absl::StrCat(options.root, "/", entry.path));
    if (!image.ok()) return image.status();
    const uint64_t id = order[n];
    const std::string record =
        recordio ? EncodeRecordIO(EncodeImageRecord(
                       ImageRecord{{static_cast<float>(entry.label)}, id, 0, *std::move(image)}))
                 : EncodeTFRecord(EncodeImageExample(*image, entry.label + options.label_base));
    if (recordio) idx << id << '\t' << in_shard << '\n';
    rec.write(record.data(), static_cast<std::streamsize>(record.size()));
    in_shard += static_cast<int64_t>(record.size());
    if (in_shard >= options.shard_bytes) {
      if (absl::Status s = close_shard(); !s.ok()) return s;
    }
    const int64_t done = static_cast<int64_t>(n) + 1;
    if (done % every == 0 || done == static_cast<int64_t>(order.size())) {
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      const double rate = seconds > 0 ? done / seconds : 0;
      progress << absl::StrFormat(
                      "pack: %d of %d images, %d shards, %.0f images/s, ETA %s\n", done,
                      order.size(), shards.size(), rate,
                      DurationText(rate > 0 ? (order.size() - done) / rate : -1))
               << std::flush;
    }
  }
  if (absl::Status s = close_shard(); !s.ok()) return s;
  return shards;
}

}  // namespace cohort
