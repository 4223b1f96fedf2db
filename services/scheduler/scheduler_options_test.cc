// The scheduler's options: one check for the scheduler and the launcher, and the command line
// that gives them back.

#include "services/scheduler/scheduler_options.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;

SchedulerOptions Elastic(int workers, int min, int max) {
  SchedulerOptions o;
  o.num_workers = workers;
  o.on_worker_failure = "elastic";
  o.min_workers = min;
  o.max_workers = max;
  return o;
}

TEST(SchedulerOptionsTest, TheJobTheyDescribe) {
  SchedulerOptions o = Elastic(3, 2, 0);
  o.num_shards = 2;
  o.mode = "dist_async";
  o.job_id = "job-7";
  o.shard_restart_grace_s = 60;
  o.max_shard_restarts = 3;
  o.shard_replicas = 2;
  const absl::StatusOr<JobSpec> spec = o.ToJobSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_workers, 3);
  EXPECT_EQ(spec->num_shards, 2);
  EXPECT_EQ(spec->mode, KVStoreMode::kDistAsync);
  EXPECT_EQ(spec->job_id, "job-7");
  EXPECT_TRUE(spec->elastic);
  EXPECT_EQ(spec->min_workers, 2);
  EXPECT_EQ(spec->max_workers, 3);  // 0: as many as it starts with
  EXPECT_EQ(spec->shard_restart_grace, absl::Seconds(60));
  EXPECT_EQ(spec->max_shard_restarts, 3);
  EXPECT_EQ(spec->shard_replicas, 2);
  EXPECT_EQ(spec->form_timeout, absl::Seconds(120));
  EXPECT_FALSE(SchedulerOptions().ToJobSpec()->job_id.empty());  // a new one
}

TEST(SchedulerOptionsTest, ALargeJobsMembersBeatLessOftenAndAreGivenLonger) {
  SchedulerOptions o;
  o.num_workers = 8;
  o.num_shards = 2;
  EXPECT_EQ(o.ToJobSpec()->heartbeat_interval, absl::Milliseconds(250));
  EXPECT_EQ(o.ToJobSpec()->heartbeat_timeout, absl::Seconds(3));
  o.num_workers = 1024;
  o.num_shards = 64;  // about 500 heartbeats a second; the timeout three intervals
  EXPECT_EQ(o.ToJobSpec()->heartbeat_interval, absl::Milliseconds(2176));
  EXPECT_EQ(o.ToJobSpec()->heartbeat_timeout, absl::Milliseconds(3 * 2176));
  o.heartbeat_timeout_s = 3;  // asked for: the interval stays a third of it
  EXPECT_EQ(o.ToJobSpec()->heartbeat_interval, absl::Seconds(1));
  EXPECT_EQ(o.ToJobSpec()->heartbeat_timeout, absl::Seconds(3));
  o.heartbeat_timeout_s = 0;
  o.num_workers = 4096;
  EXPECT_EQ(o.ToJobSpec()->heartbeat_interval, absl::Seconds(5));
  EXPECT_EQ(o.ToJobSpec()->heartbeat_timeout, absl::Seconds(15));
  o.num_workers = 2;
  o.heartbeat_timeout_s = 0.3;
  EXPECT_EQ(o.ToJobSpec()->heartbeat_interval, absl::Milliseconds(100));
}

TEST(SchedulerOptionsTest, RefusesWhatNoJobCouldRun) {
  const auto refused = [](SchedulerOptions o, absl::string_view says) {
    const absl::Status s = o.ToJobSpec().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), says)) << s;
  };
  SchedulerOptions o;
  o.num_workers = 0;
  refused(o, "at least 1 worker");
  o = SchedulerOptions();
  o.mode = "local";
  refused(o, "unknown --mode 'local'; use dist_sync or dist_async");
  o = SchedulerOptions();
  o.job_id = "a b";
  refused(o, "--job_id 'a b' may hold only");
  o = SchedulerOptions();
  o.linger_s = -1;
  refused(o, "--linger");
  o = SchedulerOptions();
  o.on_worker_failure = "retry";
  refused(o, "--on_worker_failure=retry: expected fail or elastic");
  refused(Elastic(2, 3, 0), "need 1 <= min_workers <= the number of workers (2) <= max_workers");
  refused(Elastic(2, 0, 0), "need 1 <= min_workers");
  refused(Elastic(3, 1, 2), "need 1 <= min_workers");
  o = SchedulerOptions();
  o.shard_replicas = 2;
  refused(o, "--shard_replicas=2 with 1 shards: 1, or 2 with 2 shards or more");
  o.num_shards = 4;
  o.shard_replicas = 3;
  refused(o, "--shard_replicas=3 with 4 shards");
}

TEST(SchedulerOptionsTest, WritesTheSchedulersCommandLine) {
  SchedulerOptions o = Elastic(2, 1, 0);
  o.num_shards = 2;
  o.job_id = "job-7";
  o.shard_restart_grace_s = 60;
  o.max_shard_restarts = 3;
  o.shard_replicas = 2;
  EXPECT_THAT(o.ToArgs(),
              ElementsAre("--num_workers=2", "--num_shards=2", "--mode=dist_sync", "--linger=0",
                          "--job_id=job-7", "--baseline_images_per_second=0",
                          "--shard_restart_grace=60", "--max_shard_restarts=3",
                          "--shard_replicas=2", "--on_worker_failure=elastic",
                          "--min_workers=1", "--max_workers=2"));
  o = SchedulerOptions();
  o.job_id = "j";
  o.heartbeat_timeout_s = 1.5;
  EXPECT_THAT(o.ToArgs(), ElementsAre("--num_workers=1", "--num_shards=1", "--mode=dist_sync",
                                      "--linger=0", "--job_id=j",
                                      "--baseline_images_per_second=0",
                                      "--heartbeat_timeout=1.5"));
}

}  // namespace
}  // namespace cohort
