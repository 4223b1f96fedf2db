#include "trainer/loop/progress_log.h"

#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace cohort {
namespace {

TEST(ProgressLog, WritesTheTableAndOneJsonObjectPerRow) {
  std::ostringstream table, json;
  ProgressLog log(&table, &json);
  log.Header();
  log.Row({100, 0, 5012.25, 0.6125, 0.02, 0.125, 1795000000.5, 84.2});
  log.Row({200, 1, 4800, 0.5, 0.01, 0, 1795000001});
  EXPECT_EQ(table.str(),
            "    Step  Epoch  Speed(img/s)      Loss        LR  Comm%      ETA\n"
            "     100      0        5012.2    0.6125   0.02000   12.5    1m24s\n"
            "     200      1        4800.0    0.5000   0.01000    0.0        -\n");
  std::istringstream lines(json.str());
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  const nlohmann::json first = nlohmann::json::parse(line);
  EXPECT_EQ(first["step"], 100);
  EXPECT_EQ(first["epoch"], 0);
  EXPECT_DOUBLE_EQ(first["images_per_second"].get<double>(), 5012.25);
  EXPECT_DOUBLE_EQ(first["loss"].get<double>(), 0.6125);
  EXPECT_DOUBLE_EQ(first["lr"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(first["comm_overhead"].get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(first["time"].get<double>(), 1795000000.5);
  EXPECT_DOUBLE_EQ(first["eta_seconds"].get<double>(), 84.2);
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(nlohmann::json::parse(line)["step"], 200);
  EXPECT_FALSE(std::getline(lines, line));
}

TEST(ProgressLog, DurationsReadAtAGlance) {
  EXPECT_EQ(DurationText(0), "0s");
  EXPECT_EQ(DurationText(44.6), "45s");
  EXPECT_EQ(DurationText(185), "3m05s");
  EXPECT_EQ(DurationText(2 * 3600 + 7 * 60 + 30), "2h07m");
  EXPECT_EQ(DurationText(3 * 86400 + 4 * 3600 + 59), "3d04h");
  EXPECT_EQ(DurationText(-1), "-");
}

TEST(ProgressLog, WithoutJsonWritesOnlyTheTable) {
  std::ostringstream table;
  ProgressLog log(&table, nullptr);
  log.Row({1, 0, 1, 1, 1, 0.5, 0});
  EXPECT_NE(table.str().find("50.0"), std::string::npos);
}

}  // namespace
}  // namespace cohort
