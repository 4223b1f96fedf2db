#include "services/scheduler/job_journal.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "services/common/test_tmp_dir.h"

namespace cohort {
namespace {

std::string FreshPath(const std::string& name) {
  const std::string path = TmpDir() + "/" + name;
  std::remove(path.c_str());
  return path;
}

TEST(JobJournalTest, WhatOneSchedulerRecordedTheNextReads) {
  const std::string path = FreshPath("recorded.journal");
  {
    auto journal = JobJournal::Open(path, "job-a");
    ASSERT_TRUE(journal.ok()) << journal.status();
    EXPECT_TRUE((*journal)->state().finished_workers.empty());
    EXPECT_FALSE((*journal)->state().end.has_value());
    ASSERT_TRUE((*journal)->RecordFinished(1, "node\n2", 77).ok());
  }
  auto again = JobJournal::Open(path, "job-a");
  ASSERT_TRUE(again.ok()) << again.status();
  const JournalState& held = (*again)->state();
  ASSERT_EQ(held.finished_workers.size(), 1u);
  EXPECT_EQ(held.finished_workers.at(1).host, "node\n2");
  EXPECT_EQ(held.finished_workers.at(1).pid, 77);
  EXPECT_EQ(DescribeJournal(held), "worker 1 finished");
  ASSERT_TRUE((*again)->RecordShares({{0, 0}, {-1, 0}, {false, true}, {1}}).ok());
  ASSERT_TRUE((*again)->RecordShares({{0, 0}, {1, 0}, {false, true}, {}}).ok());
  ASSERT_TRUE((*again)->RecordFinished(0, "node1", 5).ok());
  ASSERT_TRUE((*again)->RecordEnd(JobState::kDone, "all 2 workers finished").ok());

  absl::StatusOr<JournalState> read = ReadJournal(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->job_id, "job-a");
  EXPECT_EQ(read->finished_workers.size(), 2u);
  ASSERT_TRUE(read->shares.has_value());  // the latest
  EXPECT_EQ(read->shares->backups, (std::vector<int>{1, 0}));
  EXPECT_EQ(read->shares->copied, (std::vector<bool>{false, true}));
  EXPECT_TRUE(read->shares->dead.empty());
  ASSERT_TRUE(read->end.has_value());
  EXPECT_EQ(*read->end, JobState::kDone);
  EXPECT_EQ(DescribeJournal(*read), "the job ended DONE (all 2 workers finished)");
}

TEST(JobJournalTest, ALineCutShortByACrashIsSkipped) {
  const std::string path = FreshPath("cut.journal");
  {
    std::ofstream out(path);
    out << "{\"job\":\"job-b\"}\n{\"finished\":0,\"host\":\"h\",\"pid\":3}\n{\"end\":\"DO";
  }
  absl::StatusOr<JournalState> read = ReadJournal(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->finished_workers.size(), 1u);
  EXPECT_FALSE(read->end.has_value());
}

TEST(JobJournalTest, AnotherJobsJournalIsRefused) {
  const std::string path = FreshPath("other.journal");
  ASSERT_TRUE(JobJournal::Open(path, "job-c").ok());
  auto other = JobJournal::Open(path, "job-d");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "journal " + path +
                " is job job-c's, not job job-d's: give each job its own --journal");
}

TEST(JobJournalTest, AMissingJournalHoldsNothing) {
  absl::StatusOr<JournalState> read = ReadJournal(TmpDir() + "/no-such.journal");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->job_id.empty());
  EXPECT_FALSE(read->end.has_value());
}

}  // namespace
}  // namespace cohort
