#include "tools/launch/hosts.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cohort::launch {
namespace {

std::vector<std::pair<std::string, int>> Flat(const std::vector<Host>& hosts) {
  std::vector<std::pair<std::string, int>> out;
  for (const Host& h : hosts) out.emplace_back(h.name, h.slots);
  return out;
}

void ExpectError(absl::StatusOr<std::vector<Host>> hosts, absl::string_view message) {
  ASSERT_FALSE(hosts.ok()) << "accepted";
  EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(hosts.status().message(), message)) << hosts.status();
}

TEST(HostsFileTest, EveryLineFormWithCommentsBlanksCrlfAndSpaces) {
  const auto hosts = ParseHostsFile(
      "# the cluster\r\n"
      "node1\r\n"
      "  node2 slots=4   # four GPUs\r\n"
      "\r\n"
      "\tnode3:2  \n"
      "alice@node4\n"
      "10.0.0.5 slots=3\n"
      "[fe80::1]:2\n"
      "   \n",
      "hosts.txt");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(Flat(*hosts), (std::vector<std::pair<std::string, int>>{{"node1", 1},
                                                                    {"node2", 4},
                                                                    {"node3", 2},
                                                                    {"alice@node4", 1},
                                                                    {"10.0.0.5", 3},
                                                                    {"[fe80::1]", 2}}));
}

TEST(HostsFileTest, ADuplicateHostIsAnErrorNamingItsLine) {
  ExpectError(ParseHostsFile("a\nb slots=2\na:3\n", "hosts.txt"),
              "hosts.txt:3: host a is listed twice; give it once, with all its slots");
}

TEST(HostsFileTest, AnUnknownOptionIsAnError) {
  ExpectError(ParseHostsFile("a max_slots=4\n", "h"), "h:1: unknown option 'max_slots=4'");
  ExpectError(ParseHostsFile("a b\n", "h"), "h:1: unknown option 'b'");
}

TEST(HostsFileTest, SlotsMustBeAPositiveWholeNumber) {
  for (const char* line : {"a slots=0", "a slots=abc", "a slots=-1", "a slots=", "a:0", "a:x",
                           "a slots=1.5"}) {
    SCOPED_TRACE(line);
    ExpectError(ParseHostsFile(line, "h"), "h:1: slots '");
  }
  ExpectError(ParseHostsFile("a:2 slots=3", "h"), "h:1: host a gives its slots twice");
  ExpectError(ParseHostsFile("a slots=2 slots=3", "h"), "h:1: host a gives its slots twice");
}

TEST(HostsFileTest, AFileWithNoHostIsAnError) {
  ExpectError(ParseHostsFile("", "empty.txt"), "empty.txt: no host in it");
  ExpectError(ParseHostsFile("# only a comment\n\n  \r\n", "c.txt"), "c.txt: no host in it");
}

TEST(HostsFileTest, AMalformedHostIsAnError) {
  ExpectError(ParseHostsFile(":3\n", "h"), "h:1: host ':3': expected host, host:N or [IPv6]:N");
  ExpectError(ParseHostsFile("fe80::1\n", "h"), "h:1: host 'fe80::1'");
}

TEST(HostListTest, InlineHostsWithSlots) {
  const auto hosts = ParseHostList("host1,host2:2, host3");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(Flat(*hosts), (std::vector<std::pair<std::string, int>>{
                              {"host1", 1}, {"host2", 2}, {"host3", 1}}));
  ExpectError(ParseHostList("a,b,a"), "-H entry 3: host a is listed twice");
  ExpectError(ParseHostList("a:0"), "-H entry 1: slots '0'");
  ExpectError(ParseHostList(" , "), "-H: no host in it");
}

TEST(PlaceJobTest, SchedulerFirstShardsInTurnWorkersSpreadWithinSlots) {
  const std::vector<Host> hosts = {{"a", 1}, {"b", 3}, {"c", 2}};
  const auto p = PlaceJob(hosts, /*num_workers=*/6, /*num_shards=*/4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scheduler, 0);
  EXPECT_EQ(p->shards, (std::vector<int>{0, 1, 2, 0}));
  // a takes 1, then b and c alternate until c is full, then b.
  EXPECT_EQ(p->workers, (std::vector<int>{0, 1, 2, 1, 2, 1}));
}

TEST(PlaceJobTest, OneWorkerPerHostWhenSlotsAllow) {
  const auto p = PlaceJob({{"a", 2}, {"b", 2}, {"c", 2}}, 3, 3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->workers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p->shards, (std::vector<int>{0, 1, 2}));
}

TEST(PlaceJobTest, TheUserMovesTheSchedulerAndTheShards) {
  const std::vector<Host> hosts = {{"a", 1}, {"b", 1}, {"alice@c", 1}};
  PlacementChoice choice;
  choice.scheduler_host = "alice@c";
  choice.shard_hosts = {"b", "alice@c"};
  const auto p = PlaceJob(hosts, 3, 3, choice);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scheduler, 2);
  EXPECT_EQ(p->shards, (std::vector<int>{1, 2, 1}));
  EXPECT_EQ(p->workers, (std::vector<int>{0, 1, 2}));
  choice.shard_hosts = {"d"};
  EXPECT_EQ(PlaceJob(hosts, 3, 3, choice).status().message(),
            "--shard_hosts 'd' is not one of the hosts (a, b, alice@c)");
  choice.scheduler_host = "c";
  EXPECT_EQ(PlaceJob(hosts, 3, 3, choice).status().message(),
            "--scheduler_host 'c' is not one of the hosts (a, b, alice@c)");
}

TEST(PlaceJobTest, TooFewSlotsIsOneErrorNamingTheCounts) {
  const auto p = PlaceJob({{"a", 1}, {"b", 2}}, 4, 2);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "4 workers, but the 2 hosts have 3 slots; add hosts or slots, or start fewer "
            "workers (-n)");
}

}  // namespace
}  // namespace cohort::launch
