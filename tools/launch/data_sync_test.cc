#include "tools/launch/data_sync.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

namespace fs = std::filesystem;

class DataSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = absl::StrCat(TmpDir(), "/", testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(data_);
    fs::create_directories(data_ + "/rec");
    for (int f = 0; f < 5; ++f) Touch(absl::StrFormat("rec/train-%05d", f));
    Touch("rec/val-00000");
  }
  void Touch(const std::string& base) {
    std::ofstream(absl::StrCat(data_, "/", base, ".rec")) << "r";
    std::ofstream(absl::StrCat(data_, "/", base, ".idx")) << "0\t0\n";
  }
  std::string Rec(int f) const { return absl::StrFormat("%s/rec/train-%05d.rec", data_, f); }
  std::string Idx(int f) const { return absl::StrFormat("%s/rec/train-%05d.idx", data_, f); }

  std::string data_;
};

// Three workers on hosts 0, 1, 1 (host 2 runs none): by files, host 0 reads files 0 and 3
// (rank 0), host 1 files 1, 4 (rank 1) and 2 (rank 2).
TEST_F(DataSyncTest, ByFilesEachHostGetsItsRanksRecordsEveryIndexAndTheEvaluationSplit) {
  Placement placement;
  placement.workers = {0, 1, 1};
  auto plan = PlanDataSync({"--model=lenet", absl::StrCat("--dataset=recordio:", data_, "/rec/train"),
                            "--data-partition", "files"},
                           "/work", "/sync", placement, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->has_value());
  const DataSyncPlan& p = **plan;
  EXPECT_EQ(p.root, "/sync/.cohort-data");
  EXPECT_EQ(p.dataset, absl::StrCat("recordio:/sync/.cohort-data", data_, "/rec/train"));
  EXPECT_EQ(p.eval_dataset, absl::StrCat("recordio:/sync/.cohort-data", data_, "/rec/val"));
  const std::vector<std::string> every_index = {Idx(0), Idx(1), Idx(2), Idx(3), Idx(4)};
  const std::string val_idx = data_ + "/rec/val-00000.idx", val_rec = data_ + "/rec/val-00000.rec";
  std::vector<std::string> host0 = every_index;
  host0.insert(host0.end(), {Rec(0), Rec(3), val_idx, val_rec});
  std::vector<std::string> host1 = every_index;
  host1.insert(host1.end(), {Rec(1), Rec(2), Rec(4), val_idx, val_rec});
  ASSERT_EQ(p.files_by_host.size(), 3u);
  EXPECT_EQ(p.files_by_host[0], host0);
  EXPECT_EQ(p.files_by_host[1], host1);
  EXPECT_TRUE(p.files_by_host[2].empty());
  EXPECT_NE(p.summary.find("its 5 .rec files shared out by rank (2/3 per host)"), std::string::npos)
      << p.summary;
}

TEST_F(DataSyncTest, BySamplesEveryHostGetsEverything) {
  Placement placement;
  placement.workers = {0, 1};
  auto plan = PlanDataSync({absl::StrCat("--dataset=recordio:", data_, "/rec/train")}, "/work",
                           "/sync", placement, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->has_value());
  EXPECT_EQ((**plan).files_by_host[0].size(), 12u);
  EXPECT_EQ((**plan).files_by_host[0], (**plan).files_by_host[1]);
}

TEST_F(DataSyncTest, FoldersGoWholeAndDataInMemoryOrInTheWorkingDirectoryNotAtAll) {
  fs::create_directories(data_ + "/images/train/a");
  fs::create_directories(data_ + "/images/val/a");
  Placement placement;
  placement.workers = {0};
  auto folder = PlanDataSync({absl::StrCat("--dataset=imagefolder:", data_, "/images")}, "/work",
                             "/sync", placement, 1);
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_TRUE(folder->has_value());
  EXPECT_EQ((**folder).files_by_host[0],
            (std::vector<std::string>{data_ + "/images/train", data_ + "/images/val"}));
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"--dataset=fashion-mnist"},
        std::vector<std::string>{"--dataset=recordio:rec/train"},
        std::vector<std::string>{absl::StrCat("--dataset=recordio:", data_, "/rec/train")}}) {
    auto none = PlanDataSync(words, data_, "/sync", placement, 1);
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_FALSE(none->has_value()) << words[0];
  }
  const absl::Status missing =
      PlanDataSync({"--dataset=recordio:/nowhere/train"}, "/work", "/sync", placement, 1).status();
  EXPECT_NE(missing.message().find("/nowhere/train"), std::string::npos) << missing;
}

}  // namespace
}  // namespace cohort::launch
