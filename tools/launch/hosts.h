#ifndef COHORT_TOOLS_LAUNCH_HOSTS_H_
#define COHORT_TOOLS_LAUNCH_HOSTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort::launch {

// One machine of a job and how many workers it takes.
struct Host {
  std::string name;  // what ssh dials: host, user@host, an address, or [IPv6]
  int slots = 1;
};

// Whether `name` may name a host: a DNS name (RFC 1123 labels of letters, digits and inner
// hyphens, 1-63 characters each, 253 in all, no trailing dot), an IPv4 address a.b.c.d or an
// IPv6 address in brackets ([fe80::1]), each optionally after user@ (a POSIX portable user
// name: letters, digits, '.', '_' and '-', not first). Nothing else reaches ssh or rsync, so no
// name can pass for one of their options. InvalidArgument saying why, with the name escaped.
absl::Status CheckHostName(absl::string_view name);

// A hosts file (launch -H FILE), one host a line, as Horovod and Open MPI write them:
//   host              one slot
//   host slots=N      N slots
//   host:N            N slots
// '#' starts a comment; a UTF-8 byte order mark, blank lines, CRLF line ends and surrounding
// spaces are fine. A name CheckHostName refuses, a duplicate host (the DNS name compared
// without case, the user with), an unknown option, a slot count that is not a positive number
// and a file with no host are each one InvalidArgument naming the source (the file's name) and
// the line; the input it quotes is escaped, so no byte of it reaches a terminal raw.
absl::StatusOr<std::vector<Host>> ParseHostsFile(absl::string_view text, absl::string_view source);

// The inline form, -H host1,host2:2 (each entry as a file's line without options); errors
// name the entry ("-H entry 2").
absl::StatusOr<std::vector<Host>> ParseHostList(absl::string_view list);

// How launch takes a -H argument that names no file: true when it is plainly a host list (no
// '/', and a ',', a ':' or a '@', or an IPv4 address). A path is not, and neither is a lone
// name ("hosts", "node1"): it may as well be a hosts file's name mistyped as a host's.
bool IsPlainlyHostList(absl::string_view arg);

// Where a job's processes run, by host index into the hosts list.
struct Placement {
  int scheduler = 0;
  std::vector<int> shards;   // by shard rank
  std::vector<int> workers;  // by worker rank
};

// What the user overrides of the default placement (launch --scheduler_host, --shard_hosts),
// by the hosts' names as the hosts list writes them.
struct PlacementChoice {
  std::string scheduler_host;            // empty: the first host
  std::vector<std::string> shard_hosts;  // empty: every host
};

// As MXNet's launch.py: the scheduler on the first host; shards one per host in turn; workers
// spread over the hosts in turn, each host taking at most its slots. InvalidArgument naming
// the counts when the hosts have fewer slots than workers, and naming the host when a choice
// names one that is not in the list.
absl::StatusOr<Placement> PlaceJob(const std::vector<Host>& hosts, int num_workers,
                                   int num_shards, const PlacementChoice& choice = {});

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_HOSTS_H_
