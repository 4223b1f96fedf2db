#include "tools/launch/line_prefixer.h"

#include <string>

#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

TEST(LinePrefixerTest, PrefixesEveryLineOfOneRead) {
  LinePrefixer p("[worker 1] ");
  std::string out;
  p.Feed("a\nbb\nccc\n", &out);
  EXPECT_EQ(out, "[worker 1] a\n[worker 1] bb\n[worker 1] ccc\n");
}

TEST(LinePrefixerTest, HoldsAPartialLineUntilItsNewlineArrives) {
  LinePrefixer p("[shard 0] ");
  std::string out;
  p.Feed("hel", &out);
  EXPECT_EQ(out, "");
  p.Feed("lo wor", &out);
  EXPECT_EQ(out, "");
  p.Feed("ld\nnext", &out);
  EXPECT_EQ(out, "[shard 0] hello world\n");
  p.Feed("\n", &out);
  EXPECT_EQ(out, "[shard 0] hello world\n[shard 0] next\n");
}

TEST(LinePrefixerTest, DivertsControlLinesWhenAskedTo) {
  LinePrefixer p("[h1 scheduler] ");
  std::string out;
  std::vector<std::string> control;
  p.Feed("up\n\x1eport sched", &out, &control);
  p.Feed("uler.port 9000\nnext\n", &out, &control);
  EXPECT_EQ(out, "[h1 scheduler] up\n[h1 scheduler] next\n");
  EXPECT_EQ(control, std::vector<std::string>{"port scheduler.port 9000"});
  // Without a place for them they are output like any line.
  out.clear();
  p.Feed("\x1eport x 1\n", &out);
  EXPECT_EQ(out, "[h1 scheduler] \x1eport x 1\n");
}

TEST(LinePrefixerTest, KeepsEmptyLines) {
  LinePrefixer p("[s] ");
  std::string out;
  p.Feed("\n\nx\n\n", &out);
  EXPECT_EQ(out, "[s] \n[s] \n[s] x\n[s] \n");
}

TEST(LinePrefixerTest, FlushEndsAPartialLastLine) {
  LinePrefixer p("[scheduler] ");
  std::string out;
  p.Feed("done\nno newline", &out);
  p.Flush(&out);
  EXPECT_EQ(out, "[scheduler] done\n[scheduler] no newline\n");
  p.Flush(&out);  // nothing held any more
  EXPECT_EQ(out, "[scheduler] done\n[scheduler] no newline\n");
}

TEST(LinePrefixerTest, FlushWithoutPartialLineWritesNothing) {
  LinePrefixer p("[s] ");
  std::string out;
  p.Flush(&out);
  EXPECT_EQ(out, "");
  p.Feed("a\n", &out);
  p.Flush(&out);
  EXPECT_EQ(out, "[s] a\n");
}

TEST(LinePrefixerTest, BreaksALineThatNeverEnds) {
  LinePrefixer p("[w] ");
  std::string out;
  const std::string chunk(LinePrefixer::kMaxLineBytes / 2, 'x');
  p.Feed(chunk, &out);
  EXPECT_EQ(out, "");
  p.Feed(chunk, &out);  // reaches the limit: written as a line of its own
  EXPECT_EQ(out, "[w] " + chunk + chunk + "\n");
  out.clear();
  p.Feed("tail\n", &out);
  EXPECT_EQ(out, "[w] tail\n");
}

}  // namespace
}  // namespace cohort::launch
