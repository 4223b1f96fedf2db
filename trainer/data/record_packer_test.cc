#include "trainer/data/record_packer.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/data/encoded_images.h"
#include "trainer/data/recordio.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class RecordPackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / "packer" /
            testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 20; ++i) {
        const fs::path path = root_ / "images" / absl::StrCat("class", c) / absl::StrCat(i, ".jpg");
        fs::create_directories(path.parent_path());
        // Distinct bytes, some holding RecordIO's magic to be split around.
        std::ofstream(path, std::ios::binary)
            << absl::StrCat("image ", c, "/", i, std::string(i * 37, 'p'), "\x0a\x23\xd7\xce");
      }
    }
  }

  std::vector<std::string> Pack(const std::string& name, uint64_t seed, int64_t shard_bytes,
                                RecordFormat format = RecordFormat::kRecordIO) {
    absl::StatusOr<ImageList> list = ListImageFolder((root_ / "images").string());
    EXPECT_TRUE(list.ok()) << list.status();
    PackOptions options;
    options.root = (root_ / "images").string();
    options.prefix = (root_ / "out" / name).string();  // a folder not there yet
    options.seed = seed;
    options.shard_bytes = shard_bytes;
    options.format = format;
    std::ostringstream progress;
    absl::StatusOr<std::vector<std::string>> shards = PackRecords(*list, options, progress, 25);
    EXPECT_TRUE(shards.ok()) << shards.status();
    EXPECT_NE(progress.str().find("pack: 60 of 60 images"), std::string::npos) << progress.str();
    return shards.ok() ? *shards : std::vector<std::string>{};
  }

  fs::path root_;
};

TEST_F(RecordPackerTest, EveryImageOnceWithItsLabelInShardsOfTheSizeAsked) {
  const std::vector<std::string> shards = Pack("a", 7, 2000);
  ASSERT_GT(shards.size(), 2u);
  std::set<std::string> seen;
  for (const std::string& rec : shards) {
    const std::string bytes = Read(rec);
    const std::string idx_path = rec.substr(0, rec.size() - 4) + ".idx";
    absl::StatusOr<std::vector<std::pair<uint64_t, int64_t>>> index =
        ParseRecordIOIndex(Read(idx_path), bytes.size(), idx_path);
    ASSERT_TRUE(index.ok()) << index.status();
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    for (const auto& [id, offset] : *index) {
      absl::StatusOr<RecordIORecord> r =
          ReadRecordIO(absl::Span<const uint8_t>(data, bytes.size()), offset, rec);
      ASSERT_TRUE(r.ok()) << r.status();
      absl::StatusOr<ImageRecord> image = DecodeImageRecord(r->payload, rec);
      ASSERT_TRUE(image.ok()) << image.status();
      EXPECT_EQ(image->id, id);
      const int label = static_cast<int>(image->labels[0]);
      EXPECT_EQ(image->image.rfind(absl::StrCat("image ", label, "/"), 0), 0u) << image->image;
      seen.insert(image->image);
    }
    // A shard closes once it reaches the size; only its last record may take it past.
    EXPECT_LT(bytes.size(), 2000u + 1000u) << rec;
  }
  EXPECT_EQ(seen.size(), 60u);
}

TEST_F(RecordPackerTest, WithoutShufflingTheRecordsKeepTheListsOrder) {
  absl::StatusOr<ImageList> list = ListImageFolder((root_ / "images").string());
  ASSERT_TRUE(list.ok()) << list.status();
  PackOptions options;
  options.root = (root_ / "images").string();
  options.prefix = (root_ / "out" / "kept").string();
  options.shuffle = false;
  std::ostringstream progress;
  ASSERT_TRUE(PackRecords(*list, options, progress).ok());
  auto packed = OpenEncodedImages(absl::StrCat("recordio:", options.prefix), {});
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ((*packed)->size(), 60);
  for (int64_t i = 0; i < 60; ++i) {
    std::string bytes;
    ASSERT_TRUE((*packed)->Read(i, &bytes).ok());
    EXPECT_EQ(bytes, Read(options.root + "/" + list->images[i].path)) << i;
  }
}

TEST_F(RecordPackerTest, TheSameSeedGivesTheSameBytesAndAnotherAnotherOrder) {
  const std::vector<std::string> a = Pack("a", 7, 1 << 20);
  const std::vector<std::string> b = Pack("b", 7, 1 << 20);
  const std::vector<std::string> c = Pack("c", 8, 1 << 20);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(Read(a[0]), Read(b[0]));
  EXPECT_NE(Read(a[0]), Read(c[0]));
  EXPECT_EQ(Read(a[0]).size(), Read(c[0]).size());
}

// What the packer writes, the readers read: every image once, with its class.
TEST_F(RecordPackerTest, BothFormatsReadBackAsTheFolderHeldThem) {
  absl::StatusOr<std::unique_ptr<EncodedImages>> folder =
      OpenEncodedImages(absl::StrCat("imagefolder:", (root_ / "images").string()), {});
  ASSERT_TRUE(folder.ok()) << folder.status();
  std::multiset<std::pair<std::string, int64_t>> want;
  std::string bytes;
  for (int64_t i = 0; i < (*folder)->size(); ++i) {
    absl::StatusOr<int64_t> label = (*folder)->Read(i, &bytes);
    ASSERT_TRUE(label.ok()) << label.status();
    want.emplace(bytes, *label);
  }
  const std::vector<std::string> recs = Pack("rec", 3, 1500);
  const std::vector<std::string> tfs = Pack("tf", 3, 1500, RecordFormat::kTFRecord);
  ASSERT_GT(tfs.size(), 2u);
  EXPECT_EQ(tfs[0], (root_ / "out" / "tf-00000.tfrecord").string());
  for (const std::string spec : {absl::StrCat("recordio:", (root_ / "out" / "rec").string()),
                                 absl::StrCat("tfrecord:", (root_ / "out" / "tf-*.tfrecord").string())}) {
    SCOPED_TRACE(spec);
    absl::StatusOr<std::unique_ptr<EncodedImages>> packed = OpenEncodedImages(spec, {});
    ASSERT_TRUE(packed.ok()) << packed.status();
    EXPECT_EQ((*packed)->num_classes(), 3);
    std::multiset<std::pair<std::string, int64_t>> got;
    for (int64_t i = 0; i < (*packed)->size(); ++i) {
      absl::StatusOr<int64_t> label = (*packed)->Read(i, &bytes);
      ASSERT_TRUE(label.ok()) << label.status();
      got.emplace(bytes, *label);
    }
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace cohort
