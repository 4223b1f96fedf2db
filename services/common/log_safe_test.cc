#include "services/common/log_safe.h"

#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(LogSafeTest, PlainNamesStayAsTheyAre) {
  EXPECT_EQ(LogSafe("worker-3.example:7001"), "worker-3.example:7001");
  EXPECT_EQ(LogSafe("CN=cohort job CA, O='x'"), "CN=cohort job CA, O='x'");
}

TEST(LogSafeTest, NoPeerTextStartsALineOrDrivesTheTerminal) {
  EXPECT_EQ(LogSafe("e\nscheduler: job DONE: all 2 workers finished"),
            "e\\nscheduler: job DONE: all 2 workers finished");
  EXPECT_EQ(LogSafe("a\rb\tc"), "a\\rb\\tc");
  EXPECT_EQ(LogSafe("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(LogSafe(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(LogSafe("\x7f\xc3\xa9"), "\\x7f\\xc3\\xa9");
  // A backslash is escaped too, so an escape in the output always means a byte in the input.
  EXPECT_EQ(LogSafe("a\\nb"), "a\\\\nb");
}

TEST(LogSafeTest, LongTextIsCutSayingHowLongItWas) {
  const std::string huge(10240, 'x');
  const std::string safe = LogSafe(huge);
  EXPECT_EQ(safe, std::string(256, 'x') + "...(10240 bytes)");
  EXPECT_EQ(LogSafe(huge, 4), "xxxx...(10240 bytes)");
  EXPECT_EQ(LogSafe("\n\n", 1), "\\n...(2 bytes)");
}

}  // namespace
}  // namespace cohort
