#include "trainer/cli/args.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::vector<std::string> Canon(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return CanonicalFlagArgs(static_cast<int>(argv.size()), argv.data(), StandardFlagAliases());
}

TEST(ArgsTest, HyphensAndAliases) {
  EXPECT_EQ(Canon({"train", "--kv-store=dist_sync", "--batch-size", "64", "--network=lenet",
                   "--gpus=0,1", "-log-interval=5", "--data_dir=/a-b"}),
            (std::vector<std::string>{"train", "--kv_store=dist_sync", "--batch_size", "64",
                                      "--model=lenet", "--devices=0,1", "-log_interval=5",
                                      "--data_dir=/a-b"}));
}

TEST(ArgsTest, ValuesAndArgsAfterDoubleDashUntouched) {
  EXPECT_EQ(Canon({"train", "--output=my-model.safetensors", "-", "--", "--my-flag"}),
            (std::vector<std::string>{"train", "--output=my-model.safetensors", "-", "--",
                                      "--my-flag"}));
}

TEST(ArgsTest, ResolveUserPath) {
  EXPECT_EQ(ResolveUserPath("model.safetensors", "/home/u"), "/home/u/model.safetensors");
  EXPECT_EQ(ResolveUserPath("/tmp/m", "/home/u"), "/tmp/m");
  EXPECT_EQ(ResolveUserPath("m", ""), "m");
}

}  // namespace
}  // namespace cohort
