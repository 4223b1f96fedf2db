#include "tools/launch/status_table.h"

#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

TEST(StatusTableTest, OneLineForTheJobAndOneRowPerMember) {
  const std::string json = R"({"job_id":"job-1","state":"RUNNING","reason":"","mode":"dist_sync",
    "num_workers":1,"num_shards":1,"seconds_since_start":12.4,"images_per_second":925.14,
    "members":[
      {"role":"shard","rank":0,"state":"alive","host":"h1","pid":10,"address":"127.0.0.1:5",
       "seconds_since_heartbeat":0.12,"last_error":""},
      {"role":"worker","rank":0,"state":"alive","host":"h1","pid":11,"address":"",
       "seconds_since_heartbeat":0.2,"last_error":"",
       "progress":{"step":120,"epoch":1,"images_per_second":925.14,"step_seconds":0.0346,
                   "communication_overhead":0.12,"loss":0.51234}}]})";
  auto table = StatusTable(json);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(*table,
            "job job-1: RUNNING, 1 workers, 1 shards, dist_sync, 12 s; 925.1 img/s\n"
            "ROLE    RANK STATE    HOST                 STEP EPOCH     IMG/S  STEP_MS  COMM%     LOSS "
            "HEARTBEAT\n"
            "shard      0 alive    h1                      -     -         -        -      -        - "
            "    0.1 s\n"
            "worker     0 alive    h1                    120     1     925.1     34.6   12.0   0.5123 "
            "    0.2 s\n");
}

TEST(StatusTableTest, ShowsWhyTheJobEndedAndAMembersError) {
  const std::string json = R"({"job_id":"job-2","state":"FAILED",
    "reason":"worker 1 (host h2, pid 7) failed: out of memory","members":[
      {"role":"worker","rank":1,"state":"dead","host":"h2","seconds_since_heartbeat":4.0,
       "last_error":"out of memory"}]})";
  auto table = StatusTable(json);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_NE(table->find("job job-2: FAILED"), std::string::npos) << *table;
  EXPECT_NE(table->find("  worker 1 (host h2, pid 7) failed: out of memory\n"), std::string::npos);
  EXPECT_NE(table->find("worker     1 dead"), std::string::npos) << *table;
  EXPECT_NE(table->find("error: out of memory"), std::string::npos) << *table;
}

TEST(StatusTableTest, RefusesWhatIsNotAStatusPage) {
  EXPECT_FALSE(StatusTable("<html>").ok());
  EXPECT_FALSE(StatusTable(R"({"hello":1})").ok());
}

}  // namespace
}  // namespace cohort::launch
