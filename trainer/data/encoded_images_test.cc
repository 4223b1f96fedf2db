#include "trainer/data/encoded_images.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/data/recordio.h"
#include "trainer/data/tfrecord.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

class EncodedImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  void Write(const std::string& name, const std::string& bytes) const {
    fs::create_directories(fs::path(Path(name)).parent_path());
    std::ofstream(Path(name), std::ios::binary) << bytes;
  }

  // A .rec of images "image-<i>" labelled labels[i], and its .idx (ids i); the offsets.
  std::vector<int64_t> WriteRecordIO(const std::string& base, const std::vector<float>& labels) {
    std::string rec, idx;
    std::vector<int64_t> offsets;
    for (size_t i = 0; i < labels.size(); ++i) {
      offsets.push_back(static_cast<int64_t>(rec.size()));
      idx += absl::StrCat(i, "\t", rec.size(), "\n");
      rec += EncodeRecordIO(EncodeImageRecord({{labels[i]}, i, 0, absl::StrCat("image-", i)}));
    }
    Write(base + ".rec", rec);
    Write(base + ".idx", idx);
    return offsets;
  }

  // A TFRecord file of images "<name>-<i>" with stored labels[i].
  void WriteTFRecord(const std::string& name, const std::vector<int64_t>& labels) {
    std::string file;
    for (size_t i = 0; i < labels.size(); ++i) {
      file += EncodeTFRecord(EncodeImageExample(absl::StrCat(name, "-", i), labels[i]));
    }
    Write(name, file);
  }

  fs::path dir_;
};

// Every image's bytes and label, in order.
std::vector<std::pair<std::string, int64_t>> ReadAll(const EncodedImages& images) {
  std::vector<std::pair<std::string, int64_t>> all;
  for (int64_t i = 0; i < images.size(); ++i) {
    std::string bytes;
    absl::StatusOr<int64_t> label = images.Read(i, &bytes);
    EXPECT_TRUE(label.ok()) << label.status();
    all.emplace_back(bytes, label.value_or(-1));
  }
  return all;
}

using Images = std::vector<std::pair<std::string, int64_t>>;

TEST_F(EncodedImagesTest, AnImageFolderReadsEachFileWithItsClass) {
  Write("train/cat/b.jpg", "cat b");
  Write("train/cat/a.jpg", "cat a");
  Write("train/dog/a.jpg", "dog a");
  auto images = OpenEncodedImages(absl::StrCat("imagefolder:", Path("train")), {});
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)->num_classes(), 2);
  EXPECT_EQ(ReadAll(**images), (Images{{"cat a", 0}, {"cat b", 0}, {"dog a", 1}}));
  EXPECT_EQ((*images)->Where(2), Path("train/dog/a.jpg"));
  fs::remove(Path("train/cat/b.jpg"));
  std::string bytes;
  const absl::Status gone = (*images)->Read(1, &bytes).status();
  EXPECT_NE(gone.message().find(Path("train/cat/b.jpg")), std::string::npos) << gone;
}

TEST_F(EncodedImagesTest, AListFileNamesImagesBesideIt) {
  Write("data/x/one.jpg", "one");
  Write("data/two.jpg", "two");
  Write("data/list.lst", "0\t3\tx/one.jpg\n1\t1\ttwo.jpg\n");
  auto images = OpenEncodedImages(absl::StrCat("imagefolder:", Path("data/list.lst")), {});
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)->num_classes(), 4);
  EXPECT_EQ(ReadAll(**images), (Images{{"one", 3}, {"two", 1}}));
}

TEST_F(EncodedImagesTest, RecordIOFromOneFileOrShardsWithTheirIndex) {
  WriteRecordIO("one", {2, 0, 1});
  auto one = OpenEncodedImages(absl::StrCat("recordio:", Path("one")), {});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->num_classes(), 3);
  EXPECT_EQ(ReadAll(**one), (Images{{"image-0", 2}, {"image-1", 0}, {"image-2", 1}}));

  WriteRecordIO("packed/part-00000", {0, 1});
  WriteRecordIO("packed/part-00001", {4});
  auto shards = OpenEncodedImages(absl::StrCat("recordio:", Path("packed/part")), {});
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ((*shards)->size(), 3);
  EXPECT_EQ((*shards)->num_classes(), 5);
  EXPECT_EQ((*shards)->name(), absl::StrCat("recordio:", Path("packed/part"), " (2 files)"));
  EXPECT_EQ(ReadAll(**shards), (Images{{"image-0", 0}, {"image-1", 1}, {"image-0", 4}}));
}

TEST_F(EncodedImagesTest, RecordIOShardsAnotherRankReadsMayBeAbsent) {
  WriteRecordIO("part-00000", {0, 1, 2});
  WriteRecordIO("part-00001", {1, 1});
  fs::remove(Path("part-00001.rec"));
  const std::string spec = absl::StrCat("recordio:", Path("part"));
  const absl::Status missing = OpenEncodedImages(spec, {}).status();
  EXPECT_NE(missing.message().find("part-00001.rec"), std::string::npos) << missing;
  EncodedImagesOptions partial;
  partial.rec_may_be_absent = true;
  const absl::Status uncounted = OpenEncodedImages(spec, partial).status();
  EXPECT_NE(uncounted.message().find("--num_classes"), std::string::npos) << uncounted;
  partial.num_classes = 3;
  auto images = OpenEncodedImages(spec, partial);
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)->size(), 5);
  EXPECT_EQ((*images)->RecordsPerFile(), (std::vector<int64_t>{3, 2}));
  std::string bytes;
  EXPECT_EQ(*(*images)->Read(2, &bytes), 2);
  const absl::Status absent = (*images)->Read(3, &bytes).status();
  EXPECT_NE(absent.message().find("does not hold " + Path("part-00001.rec")), std::string::npos)
      << absent;
}

TEST_F(EncodedImagesTest, RecordIOMultiLabelRecordsTakeTheirFirstLabel) {
  ImageRecord record{{7, 2}, 0, 0, "image"};
  Write("multi.rec", EncodeRecordIO(EncodeImageRecord(record)));
  Write("multi.idx", "0\t0\n");
  auto images = OpenEncodedImages(absl::StrCat("recordio:", Path("multi")), {});
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)->num_classes(), 8);
  EXPECT_EQ(ReadAll(**images), (Images{{"image", 7}}));
}

TEST_F(EncodedImagesTest, RecordIODamageIsNamedWithFileAndOffset) {
  const std::vector<int64_t> offsets = WriteRecordIO("bad", {0, 1, 0});
  // An index past the end of its file: refused at open.
  Write("past.rec", EncodeRecordIO("x"));
  Write("past.idx", "0\t0\n1\t4096\n");
  const absl::Status past = OpenEncodedImages(absl::StrCat("recordio:", Path("past")), {}).status();
  EXPECT_NE(past.message().find("past.idx"), std::string::npos) << past;

  // A label outside the classes given.
  EncodedImagesOptions two_classes;
  two_classes.num_classes = 1;
  auto images = OpenEncodedImages(absl::StrCat("recordio:", Path("bad")), two_classes);
  ASSERT_TRUE(images.ok()) << images.status();
  std::string bytes;
  const absl::Status label = (*images)->Read(1, &bytes).status();
  EXPECT_NE(label.message().find(absl::StrCat("bad.rec at byte offset ", offsets[1])),
            std::string::npos) << label;
  EXPECT_NE(label.message().find("label 1"), std::string::npos) << label;

  // A bad magic where the index points.
  std::string rec;
  {
    std::ifstream in(Path("bad.rec"), std::ios::binary);
    rec.assign(std::istreambuf_iterator<char>(in), {});
  }
  rec[static_cast<size_t>(offsets[2])] ^= 0x55;
  Write("bad.rec", rec);
  auto damaged = OpenEncodedImages(absl::StrCat("recordio:", Path("bad")), two_classes);
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  const absl::Status magic = (*damaged)->Read(2, &bytes).status();
  EXPECT_NE(magic.message().find(Path("bad.rec")), std::string::npos) << magic;
  EXPECT_NE(magic.message().find(absl::StrCat(offsets[2])), std::string::npos) << magic;
  EXPECT_NE(magic.message().find("magic"), std::string::npos) << magic;

  // No index.
  fs::remove(Path("bad.idx"));
  const absl::Status no_index =
      OpenEncodedImages(absl::StrCat("recordio:", Path("bad")), {}).status();
  EXPECT_TRUE(absl::IsNotFound(no_index)) << no_index;
  EXPECT_NE(no_index.message().find("bad.idx"), std::string::npos) << no_index;
}

TEST_F(EncodedImagesTest, TFRecordFilesInNameOrderWithTheLabelsMapped) {
  WriteTFRecord("train-00001-of-00002", {3});
  WriteTFRecord("train-00000-of-00002", {1, 2});
  auto from_one = OpenEncodedImages(absl::StrCat("tfrecord:", Path("train-*")), {});
  ASSERT_TRUE(from_one.ok()) << from_one.status();
  EXPECT_EQ((*from_one)->num_classes(), 3);
  EXPECT_EQ(ReadAll(**from_one), (Images{{"train-00000-of-00002-0", 0},
                                         {"train-00000-of-00002-1", 1},
                                         {"train-00001-of-00002-0", 2}}));
  EncodedImagesOptions from_zero;
  from_zero.label_base = 0;
  auto zero = OpenEncodedImages(absl::StrCat("tfrecord:", Path("train-*")), from_zero);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ((*zero)->num_classes(), 4);
  EXPECT_EQ(ReadAll(**zero)[0].second, 1);
}

TEST_F(EncodedImagesTest, TFRecordDamageIsNamedWithFileAndOffset) {
  WriteTFRecord("cut", {1, 1});
  std::string file;
  {
    std::ifstream in(Path("cut"), std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t second = file.size() / 2;
  Write("cut", file.substr(0, file.size() - 3));
  const absl::Status cut = OpenEncodedImages(absl::StrCat("tfrecord:", Path("cut")), {}).status();
  EXPECT_NE(cut.message().find(absl::StrCat(Path("cut"), ": the TFRecord at byte offset ", second)),
            std::string::npos) << cut;
  EXPECT_NE(cut.message().find("truncated"), std::string::npos) << cut;

  std::string flipped = file;
  flipped[second - 6] ^= 1;  // inside the first record's bytes
  Write("crc", flipped);
  EncodedImagesOptions given;
  given.num_classes = 2;  // nothing is read at open
  auto images = OpenEncodedImages(absl::StrCat("tfrecord:", Path("crc")), given);
  ASSERT_TRUE(images.ok()) << images.status();
  std::string bytes;
  const absl::Status crc = (*images)->Read(0, &bytes).status();
  EXPECT_NE(crc.message().find("byte offset 0"), std::string::npos) << crc;
  EXPECT_NE(crc.message().find("CRC"), std::string::npos) << crc;
  EXPECT_TRUE((*images)->Read(1, &bytes).ok());
}

TEST_F(EncodedImagesTest, UnknownKindsAndMissingFilesAreNamed) {
  const absl::Status kind = OpenEncodedImages("lmdb:/data", {}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(kind)) << kind;
  EXPECT_NE(kind.message().find("imagefolder:DIR"), std::string::npos) << kind;
  const absl::Status none = OpenEncodedImages(absl::StrCat("tfrecord:", Path("x-*")), {}).status();
  EXPECT_TRUE(absl::IsNotFound(none)) << none;
  EXPECT_FALSE(IsEncodedImagesSpec("fashion-mnist"));
  EXPECT_TRUE(IsEncodedImagesSpec("recordio:/data/train"));
}

TEST_F(EncodedImagesTest, TheEvaluationSplitIsFoundBesideTheTrainingOne) {
  Write("imagenet/train/a/1.jpg", "");
  Write("imagenet/val/a/1.jpg", "");
  auto folder = ResolveSplits(absl::StrCat("imagefolder:", Path("imagenet")), "");
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(folder->train, absl::StrCat("imagefolder:", Path("imagenet/train")));
  EXPECT_EQ(folder->eval, absl::StrCat("imagefolder:", Path("imagenet/val")));

  WriteRecordIO("rec/train", {0});
  WriteRecordIO("rec/val", {0});
  auto rec = ResolveSplits(absl::StrCat("recordio:", Path("rec/train")), "");
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->eval, absl::StrCat("recordio:", Path("rec/val")));

  WriteTFRecord("tf/train-00000-of-00001", {1});
  WriteTFRecord("tf/validation-00000-of-00001", {1});
  auto tf = ResolveSplits(absl::StrCat("tfrecord:", Path("tf/train-*")), "");
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_EQ(tf->eval, absl::StrCat("tfrecord:", Path("tf/validation-*")));

  auto given = ResolveSplits(absl::StrCat("tfrecord:", Path("tf/train-*")), "tfrecord:/x");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->eval, "tfrecord:/x");

  WriteRecordIO("lonely/train", {0});
  const absl::Status none =
      ResolveSplits(absl::StrCat("recordio:", Path("lonely/train")), "").status();
  EXPECT_TRUE(absl::IsNotFound(none)) << none;
  EXPECT_NE(none.message().find("--eval_dataset"), std::string::npos) << none;
  EXPECT_NE(none.message().find(Path("lonely/val")), std::string::npos) << none;
}

}  // namespace
}  // namespace cohort
