#include "services/common/port_file.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "services/common/durable_file.h"

namespace cohort {
namespace {

std::string TmpPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(PortFileTest, HoldsOneDecimalLineThatReadsBack) {
  const std::string path = TmpPath("port");
  EXPECT_EQ(*ReadPortFile(path), std::nullopt);  // not written yet
  ASSERT_TRUE(WritePortFile(path, 43123).ok());
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line, "43123");
  EXPECT_EQ(*ReadPortFile(path), 43123);
  EXPECT_FALSE(WritePortFile("/nonexistent-dir/port", 1).ok());
}

TEST(PortFileTest, WhatIsNotAPortIsAnErrorNamingTheFile) {
  const std::string path = TmpPath("bad.port");
  ASSERT_TRUE(WriteFileAtomically(path, "http").ok());
  const auto bad = ReadPortFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status();
  ASSERT_TRUE(WriteFileAtomically(path, "70000").ok());
  EXPECT_FALSE(ReadPortFile(path).ok());
}

}  // namespace
}  // namespace cohort
