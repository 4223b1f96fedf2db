// Checkpoint folders on a real file system: manifests written last, the newest complete
// checkpoint found past damaged ones (a truncated file, a flipped byte, a manifest still
// missing), and pruning to the newest K.

#include "services/checkpoint/checkpoint_files.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/durable_file.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

class CheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(TmpDir(), "/ckpt-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }

  // Both shards' files of a version: their parts, then their manifests.
  void WriteVersion(int64_t version, int shards = 2) {
    for (int s = 0; s < shards; ++s) {
      ASSERT_TRUE(WriteCheckpointFiles(
                      root_, version, Manifest(s),
                      {{File(s), absl::StrCat("parts of shard ", s, " at version ", version)},
                       {absl::StrCat("shard-", s, ".optimizer"), "momentum"}},
                      {{"shard", absl::StrCat(s)}})
                      .ok());
    }
  }
  static std::string Manifest(int s) { return absl::StrCat("shard-", s, ".manifest.json"); }
  static std::string File(int s) { return absl::StrCat("shard-", s, ".safetensors"); }
  std::string PathOf(int64_t version, const std::string& file) const {
    return absl::StrCat(CheckpointFolder(root_, version), "/", file);
  }

  const std::vector<std::string> manifests_ = {Manifest(0), Manifest(1)};
  std::string root_;
};

TEST_F(CheckpointFilesTest, Sha256IsTheStandardOne) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(CheckpointFilesTest, TheNewestCompleteVersionIsFoundWithWhatItsManifestsSay) {
  WriteVersion(10);
  WriteVersion(20);
  auto latest = FindLatestCheckpoint(root_, manifests_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version, 20);
  EXPECT_TRUE(latest->refused.empty());
  ASSERT_EQ(latest->manifests.size(), 2u);
  EXPECT_EQ(latest->manifests[1].metadata.at("shard"), "1");
  ASSERT_EQ(latest->manifests[1].files.size(), 2u);
  EXPECT_EQ(latest->manifests[1].files[0].file, "shard-1.optimizer");
  EXPECT_EQ(CheckpointVersions(root_), (std::vector<int64_t>{20, 10}));
  EXPECT_EQ(CheckpointFolder(root_, 20), root_ + "/v000000000020");
}

TEST_F(CheckpointFilesTest, DamagedAndUnfinishedVersionsAreRefusedNamingTheFile) {
  WriteVersion(10);
  WriteVersion(20);
  WriteVersion(30);
  WriteVersion(40, /*shards=*/1);  // shard 1 has not written its manifest yet
  // v30: one file truncated.
  fs::resize_file(PathOf(30, File(1)), 5);
  // v20: one byte flipped, the size unchanged.
  {
    std::fstream f(PathOf(20, File(0)), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3);
    f.put('X');
  }
  auto latest = FindLatestCheckpoint(root_, manifests_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version, 10);
  ASSERT_EQ(latest->refused.size(), 3u);
  EXPECT_TRUE(absl::StrContains(latest->refused[0], PathOf(40, Manifest(1)) + " is missing"))
      << latest->refused[0];
  EXPECT_TRUE(absl::StrContains(latest->refused[1],
                                PathOf(30, File(1)) + " has 5 bytes; " + Manifest(1) + " says"))
      << latest->refused[1];
  EXPECT_TRUE(absl::StrContains(latest->refused[2], PathOf(20, File(0)) +
                                                        " does not match its checksum in " +
                                                        Manifest(0)))
      << latest->refused[2];
  // Damaged, not merely unfinished: those a person should look at.
  EXPECT_EQ(latest->damaged, (std::vector<int64_t>{30, 20}));

  // Set aside whole, under names no reader takes for a version; a second copy of a version
  // gets its own name; a folder gone already, or whole again (another shard set it aside and
  // writes that version anew), stays.
  auto aside = SetCheckpointAsideIfDamaged(root_, 30, manifests_);
  ASSERT_TRUE(aside.ok()) << aside.status();
  EXPECT_EQ(*aside, std::optional<std::string>(CheckpointFolder(root_, 30) + ".damaged"));
  EXPECT_TRUE(fs::exists(**aside + "/" + File(1)));
  EXPECT_EQ(*SetCheckpointAsideIfDamaged(root_, 30, manifests_), std::nullopt);
  WriteVersion(30, /*shards=*/1);
  EXPECT_EQ(*SetCheckpointAsideIfDamaged(root_, 30, manifests_), std::nullopt);
  fs::resize_file(PathOf(30, File(0)), 5);
  EXPECT_EQ(**SetCheckpointAsideIfDamaged(root_, 30, manifests_),
            CheckpointFolder(root_, 30) + ".damaged-2");
  EXPECT_EQ(CheckpointVersions(root_), (std::vector<int64_t>{40, 20, 10}));
}

TEST_F(CheckpointFilesTest, AWriteThatFailsTakesBackWhatItWrote) {
  WriteVersion(10, /*shards=*/1);
  // Shard 1's manifest cannot be written (a folder is in its way, as a full disk would be).
  fs::create_directories(PathOf(10, Manifest(1)) + "/in-the-way");
  const absl::Status s = WriteCheckpointFiles(root_, 10, Manifest(1), {{File(1), "parts"}}, {});
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(fs::exists(PathOf(10, File(1))));
  EXPECT_TRUE(fs::exists(PathOf(10, File(0))));  // the other writer's stay
  // Alone in its folder, a failed write leaves no folder behind.
  EXPECT_FALSE(
      WriteCheckpointFiles(root_, 30, "no-such-folder/manifest", {{File(0), "parts"}}, {}).ok());
  EXPECT_FALSE(fs::exists(CheckpointFolder(root_, 30)));
}

TEST_F(CheckpointFilesTest, AManifestThatIsNotOneIsRefused) {
  WriteVersion(10);
  for (const char* text : {"{", "{\"version\": 10, \"files\": [{\"file\": \"../x\", \"bytes\": 1, "
                                "\"sha256\": \"00\"}], \"metadata\": {}}",
                           "{\"version\": 11, \"files\": [], \"metadata\": {}}"}) {
    ASSERT_TRUE(WriteFileDurably(PathOf(10, Manifest(0)), text).ok());
    const auto m = VerifyManifest(root_, 10, Manifest(0));
    EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_TRUE(absl::StrContains(m.status().message(), PathOf(10, Manifest(0)))) << m.status();
  }
  EXPECT_EQ(FindLatestCheckpoint(root_, manifests_).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindLatestCheckpoint(root_ + "/none", manifests_).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CheckpointFilesTest, PruningKeepsTheNewestCompleteOnesAndTheOneBeingWritten) {
  for (int64_t v : {10, 20, 30, 40}) WriteVersion(v);
  WriteVersion(50, /*shards=*/1);  // being written
  fs::resize_file(PathOf(40, File(0)), 1);  // damaged: does not count as kept
  ASSERT_TRUE(PruneCheckpoints(root_, manifests_, 2).ok());
  EXPECT_EQ(CheckpointVersions(root_), (std::vector<int64_t>{50, 40, 30, 20}));
  ASSERT_TRUE(PruneCheckpoints(root_, manifests_, 1).ok());
  EXPECT_EQ(CheckpointVersions(root_), (std::vector<int64_t>{50, 40, 30}));
}

}  // namespace
}  // namespace cohort
