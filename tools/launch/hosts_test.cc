#include "tools/launch/hosts.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
              "hosts.txt:3: host a is listed twice (also at hosts.txt:1); give it once, with all "
              "its slots");
}

TEST(HostsFileTest, DuplicatesAreFoundWithoutCaseInTheNameButWithCaseInTheUser) {
  ExpectError(ParseHostsFile("Node1\nnode1\n", "hosts"),
              "hosts:2: host node1 is listed twice (also at hosts:1)");
  ExpectError(ParseHostsFile("me@NODE1.example.com\nme@node1.Example.COM:2\n", "hosts"),
              "hosts:2: host me@node1.Example.COM is listed twice");
  ExpectError(ParseHostsFile("[FE80::1]\n[fe80:0::1]\n", "hosts"),
              "hosts:2: host [fe80:0::1] is listed twice");
  const auto hosts = ParseHostsFile("me@node1\nMe@node1\nnode1\n", "hosts");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->size(), 3u);
}

TEST(HostsFileTest, AByteOrderMarkIsSkipped) {
  const auto hosts = ParseHostsFile("\xEF\xBB\xBFnode1 slots=2\r\nnode2\r\n", "hosts");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(Flat(*hosts),
            (std::vector<std::pair<std::string, int>>{{"node1", 2}, {"node2", 1}}));
  // Only at the start: elsewhere it is three bytes no host name has.
  ExpectError(ParseHostsFile("node1\n\xEF\xBB\xBFnode2\n", "hosts"),
              "hosts:2: '\\xef\\xbb\\xbfnode2' is not a host name");
}

// Each is the whole message: one line, naming the file and the line, the name escaped.
TEST(HostsFileTest, HostileNamesAreOneErrorNamingFileAndLine) {
  const std::string kForms =
      "; give a DNS name, an IPv4 address or an [IPv6] address, optionally after user@";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"node1\r\nh1,h2\r\n", "hosts:2: 'h1,h2' is not a host name (',' cannot be in one)"},
      {"--log-file=/tmp/x slots=2\n",
       "hosts:1: '--log-file=/tmp/x' is not a host name (it starts with '-', as an option does)"},
      {"node1\n-oProxyCommand=sh\n",
       "hosts:2: '-oProxyCommand=sh' is not a host name (it starts with '-', as an option does)"},
      {"-l@node1\n", "hosts:1: '-l@node1' is not a host name (the user starts with '-')"},
      {"a\n\nnode\x1b[2J\n",
       "hosts:3: 'node\\x1b[2J' is not a host name ('\\x1b' cannot be in one)"},
      {"node1\rnode2\n", "hosts:1: 'node1\\rnode2' is not a host name ('\\r' cannot be in one)"},
      {"$(reboot)\n", "hosts:1: '$(reboot)' is not a host name ('$' cannot be in one)"},
      {"a;b\n", "hosts:1: 'a;b' is not a host name (';' cannot be in one)"},
      {"node_1\n", "hosts:1: 'node_1' is not a host name ('_' cannot be in one)"},
      {"node1.\n",
       "hosts:1: 'node1.' is not a host name (it has an empty label: a '.' at an end, or two "
       "together)"},
      {"a..b\n", "hosts:1: 'a..b' is not a host name (it has an empty label"},
      {"node-.x\n", "hosts:1: 'node-.x' is not a host name (a label starts or ends with '-')"},
      {std::string(64, 'a') + "\n",
       "hosts:1: '" + std::string(64, 'a') +
           "' is not a host name (a label is over 63 characters)"},
      {"10.0.0.256\n",
       "hosts:1: '10.0.0.256' is not a host name (it ends in a number but is not an IPv4 address "
       "a.b.c.d)"},
      {"10.1\n", "hosts:1: '10.1' is not a host name (it ends in a number"},
      {"[fe80::1\n", "hosts:1: host '[fe80::1': expected host, host:N or [IPv6]:N"},
      {"[node1]\n", "hosts:1: '[node1]' is not a host name (the brackets hold no IPv6 address)"},
      {"[::1%eth0]\n", "hosts:1: '[::1%eth0]' is not a host name (the brackets hold no IPv6"},
      {"al ice@node1:2\n", "hosts:1: unknown option 'ice@node1:2'"},
      {"a!ce@node1\n",
       "hosts:1: 'a!ce@node1' is not a host name ('!' cannot be in the user)"},
      {"@node1\n", "hosts:1: '@node1' is not a host name (the user before '@' is empty)"},
      {"me@\n", "hosts:1: 'me@' is not a host name (it is empty)"},
      {"a@b@c\n", "hosts:1: 'a@b@c' is not a host name ('@' cannot be in one)"},
      {"a slots=2\x1b[31m\n", "hosts:1: slots '2\\x1b[31m': expected a whole number"},
      {"a \x1b[31m\n", "hosts:1: unknown option '\\x1b[31m'"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    const auto hosts = ParseHostsFile(text, "hosts");
    ASSERT_FALSE(hosts.ok()) << "accepted";
    EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string got(hosts.status().message());
    EXPECT_TRUE(absl::StartsWith(got, message)) << got;
    EXPECT_FALSE(absl::StrContains(got, '\n')) << got;
    EXPECT_FALSE(absl::StrContains(got, '\x1b')) << got;
  }
  // And it says what to write instead.
  EXPECT_TRUE(absl::EndsWith(ParseHostsFile("h1,h2", "hosts").status().message(),
                             "'h1,h2' is not a host name (',' cannot be in one)" + kForms));
}

TEST(HostsFileTest, EveryKindOfNameThatIsOne) {
  const std::string longest_label(63, 'a');
  const std::string longest_name = absl::StrCat(longest_label, ".", longest_label, ".",
                                                longest_label, ".", std::string(61, 'b'));
  ASSERT_EQ(longest_name.size(), 253u);
  for (const std::string& name :
       {std::string("n"), std::string("node-1.example.com"), std::string("7up.example"),
        std::string("10.0.0.5"), std::string("[::1]"), std::string("[fe80::1]"),
        std::string("[::ffff:10.0.0.1]"), std::string("alice@node1"),
        std::string("a.b_c-d@10.0.0.5"), std::string("_svc@[::1]"), longest_label,
        longest_name}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(CheckHostName(name).ok()) << CheckHostName(name);
  }
  EXPECT_FALSE(CheckHostName(longest_name + "b").ok());
  EXPECT_FALSE(CheckHostName("").ok());
  EXPECT_FALSE(CheckHostName(std::string("10.0.0.5\0x", 10)).ok());
  EXPECT_FALSE(CheckHostName(std::string("[::1]\0", 6)).ok());
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
  ExpectError(ParseHostList("a,b,a"), "-H entry 3: host a is listed twice (also at -H entry 1)");
  ExpectError(ParseHostList("a:0"), "-H entry 1: slots '0'");
  ExpectError(ParseHostList(" , "), "-H: no host in it");
}

TEST(HostListTest, HostileEntriesAreOneErrorNamingTheEntry) {
  ExpectError(ParseHostList("a,--log-file=/tmp/x"),
              "-H entry 2: '--log-file=/tmp/x' is not a host name (it starts with '-'");
  ExpectError(ParseHostList("a,node1\nnode2"),
              "-H entry 2: 'node1\\nnode2' is not a host name ('\\n' cannot be in one)");
  ExpectError(ParseHostList("a b"), "-H entry 1: 'a b' is not a host name (' ' cannot be in one)");
  ExpectError(ParseHostList("Node1,node1:2"), "-H entry 2: host node1 is listed twice");
}

TEST(HostListTest, OnlyAPlainHostListIsTakenForOneWhenNoFileHasItsName) {
  for (const char* list : {"a,b", "node1:2", "me@node1", "10.0.0.5", "[::1]:2", "a,"}) {
    EXPECT_TRUE(IsPlainlyHostList(list)) << list;
  }
  // A lone name may be a hosts file's, mistyped; a path is one.
  for (const char* arg :
       {"hosts", "node1", "hosts.txt", "node1.example.com", "./hosts", "conf/hosts:2", ""}) {
    EXPECT_FALSE(IsPlainlyHostList(arg)) << arg;
  }
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
