#include "tools/launch/status_table.h"

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/common/http_server.h"
#include "services/common/durable_file.h"
#include "services/common/job_certs_testing.h"
#include "services/common/test_tmp_dir.h"

namespace cohort::launch {
namespace {

TEST(StatusTableTest, OneLineForTheJobAndOneRowPerMember) {
  const std::string json = R"({"job_id":"job-1","state":"RUNNING","reason":"","mode":"dist_sync",
    "num_workers":1,"num_shards":1,"seconds_since_start":12.4,"images_per_second":925.14,
    "step":120,"total_steps":400,"eta_seconds":9.7,"test_top1":91.25,
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
            "job job-1: RUNNING, 1 worker, 1 shard, dist_sync, 12 s; 925.1 img/s\n"
            "  step 120 of 400, ETA 10s, test top-1 91.25%\n"
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

TEST(StatusTableTest, WhateverAnsweredCannotDriveTheTerminal) {
  const std::string json = R"({"job_id":"j\u001b[2J","state":"FAILED","reason":"x\ny",
    "members":[{"role":"worker","rank":0,"state":"dead","host":"h\u0000\r","last_error":"e\n"}]})";
  absl::StatusOr<std::string> table = StatusTable(json);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_TRUE(absl::StrContains(*table, "job j\\x1b[2J: FAILED")) << *table;
  EXPECT_TRUE(absl::StrContains(*table, "  x\\ny\n")) << *table;
  EXPECT_TRUE(absl::StrContains(*table, "h\\x00\\r")) << *table;
  EXPECT_EQ(table->find('\x1b'), std::string::npos);
  EXPECT_EQ(table->find('\r'), std::string::npos);
}

TEST(StatusTableTest, RefusesWhatIsNotAStatusPage) {
  EXPECT_FALSE(StatusTable("<html>").ok());
  EXPECT_FALSE(StatusTable(R"({"hello":1})").ok());
}

TEST(FetchStatusTableTest, AskedOfAScheduler) {
  const std::string page =
      R"({"job_id":"job-9","state":"RUNNING","mode":"dist_sync","num_workers":1,)"
      R"("num_shards":1,"members":[]})";
  const std::string dir = TmpDir() + "/status-job";
  ASSERT_TRUE(MakeJobCerts(dir, "scheduler").ok());
  auto security = LoadSecurity(dir, "scheduler", "");
  ASSERT_TRUE(security.ok()) << security.status();
  HttpServerOptions https;
  https.certificate_pem = (*security)->certificate_pem();
  https.key_pem = (*security)->key_pem();
  auto server = HttpServer::Start(
      https, {{"/status", [&] { return HttpResponse{200, "application/json", page}; }}},
      [](absl::string_view authorization, absl::string_view, absl::string_view) {
        return authorization == "Bearer secret";
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());
  const std::string token = TmpDir() + "/token";
  ASSERT_TRUE(WriteFileAtomically(token, "secret\n").ok());

  absl::StatusOr<std::string> table = FetchStatusTable(address, token, dir);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_TRUE(absl::StartsWith(*table, "job job-9: RUNNING")) << *table;

  // A token is never sent in clear: without the job's CA, a usage error.
  EXPECT_TRUE(absl::IsInvalidArgument(FetchStatusTable(address, token, "").status()));
  const absl::Status no_token = FetchStatusTable(address, "", dir).status();
  EXPECT_TRUE(absl::IsUnauthenticated(no_token));
  EXPECT_EQ(no_token.message(),
            absl::StrCat(address, "/status needs the job's token: give --token_file FILE"));
}

TEST(FetchStatusTableTest, MistakesAndSilence) {
  EXPECT_TRUE(absl::IsInvalidArgument(FetchStatusTable("localhost", "", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FetchStatusTable("localhost:x", "", "").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(FetchStatusTable("127.0.0.1:1", TmpDir() + "/none", "").status()));
  const absl::Status silent = FetchStatusTable("127.0.0.1:1", "", "").status();
  EXPECT_FALSE(absl::IsInvalidArgument(silent));
  EXPECT_TRUE(absl::StrContains(silent.message(), "is the scheduler running")) << silent;
  EXPECT_TRUE(
      absl::IsInvalidArgument(FetchStatusTable("127.0.0.1:1", "", TmpDir() + "/none").status()));
}

}  // namespace
}  // namespace cohort::launch
