#include "trainer/data/image_folder.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void Touch(const std::string& relative) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << "x";
  }
  fs::path root_;
};

TEST_F(ImageFolderTest, ClassesAreTheFoldersByNameAndTheirImagesInOrder) {
  Touch("zebra/b.JPG");
  Touch("zebra/a.jpeg");
  Touch("ant/nested/x.png");
  Touch("ant/readme.txt");  // not an image: ignored
  Touch("bee/1.jpg");
  Touch("top-level.jpg");  // not in a class folder: ignored, as torchvision does
  absl::StatusOr<ImageList> list = ListImageFolder(root_.string());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->classes, (std::vector<std::string>{"ant", "bee", "zebra"}));
  std::vector<std::pair<std::string, int64_t>> images;
  for (const auto& e : list->images) images.push_back({e.path, e.label});
  EXPECT_EQ(images, (std::vector<std::pair<std::string, int64_t>>{
                        {"ant/nested/x.png", 0}, {"bee/1.jpg", 1}, {"zebra/a.jpeg", 2},
                        {"zebra/b.JPG", 2}}));
}

TEST_F(ImageFolderTest, WhatIsMissingIsNamed) {
  absl::StatusOr<ImageList> list = ListImageFolder((root_ / "nowhere").string());
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(absl::StrContains(list.status().message(), "nowhere: no such folder"));
  list = ListImageFolder(root_.string());
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(absl::StrContains(list.status().message(), "holds no class folder"));
  Touch("cat/1.jpg");
  fs::create_directories(root_ / "dog");
  Touch("dog/notes.txt");
  list = ListImageFolder(root_.string());
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(absl::StrContains(list.status().message(),
                                (root_ / "dog").string() + " holds no image"))
      << list.status();
}

TEST_F(ImageFolderTest, Im2recListFiles) {
  std::ofstream(root_ / "train.lst") << "0\t3.000000\tn01/a.jpg\n1\t0.000000\tn00/b.jpg\n\n";
  absl::StatusOr<ImageList> list = ReadImageListFile((root_ / "train.lst").string());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->classes.size(), 4u);
  ASSERT_EQ(list->images.size(), 2u);
  EXPECT_EQ(list->images[0].path, "n01/a.jpg");
  EXPECT_EQ(list->images[0].label, 3);
  std::ofstream(root_ / "bad.lst") << "0\t1\ta.jpg\n1\tcat\tb.jpg\n";
  list = ReadImageListFile((root_ / "bad.lst").string());
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(absl::StrContains(list.status().message(), "bad.lst:2: expected 'index<TAB>label"))
      << list.status();
  list = ParseImageList("0\t1\ta.jpg\n1\t888888888888888888888\tb.jpg\n", "huge.lst");
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(absl::StrContains(list.status().message(), "huge.lst:2: label 8.88889e+20"))
      << list.status();
}

}  // namespace
}  // namespace cohort
