#include "tools/launch/metrics_targets.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tools/launch/test_tmp_dir.h"

namespace cohort::launch {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ReadPortFileTest, MissingIsNotYetAndGarbageIsAnError) {
  const std::string path = TmpDir() + "/x.port";
  EXPECT_EQ(*ReadPortFile(path), std::nullopt);
  ASSERT_TRUE(WriteFileAtomically(path, "8123\n").ok());
  EXPECT_EQ(*ReadPortFile(path), 8123);
  ASSERT_TRUE(WriteFileAtomically(path, "http").ok());
  const auto bad = ReadPortFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status();
  ASSERT_TRUE(WriteFileAtomically(path, "70000").ok());
  EXPECT_FALSE(ReadPortFile(path).ok());
}

TEST(FileSdTargetsTest, OneLabelledGroupPerTarget) {
  const nlohmann::json list = nlohmann::json::parse(FileSdTargets(
      {{"127.0.0.1:9100", "job-7", Role::kScheduler, 0}, {"127.0.0.1:9102", "job-7", Role::kWorker, 1}}));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["targets"], nlohmann::json::array({"127.0.0.1:9100"}));
  EXPECT_EQ(list[0]["labels"], nlohmann::json({{"job", "job-7"}, {"role", "scheduler"}, {"rank", "0"}}));
  EXPECT_EQ(list[1]["labels"]["role"], "worker");
  EXPECT_EQ(list[1]["labels"]["rank"], "1");  // file_sd labels are strings
}

TEST(WriteFileAtomicallyTest, ReplacesTheFileAndNamesAMissingFolder) {
  const std::string path = TmpDir() + "/targets.json";
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  EXPECT_EQ(Read(path), "two");
  const absl::Status s = WriteFileAtomically(TmpDir() + "/no/such/dir/t.json", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir"), std::string::npos) << s;
}

}  // namespace
}  // namespace cohort::launch
