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

// A hosts file (launch -H FILE), one host a line, as Horovod and Open MPI write them:
//   host              one slot
//   host slots=N      N slots
//   host:N            N slots
// '#' starts a comment; blank lines, CRLF line ends and surrounding spaces are fine. A
// duplicate host, an unknown option, a slot count that is not a positive number and a file
// with no host are each an InvalidArgument naming the source (file name, or "-H") and line.
absl::StatusOr<std::vector<Host>> ParseHostsFile(absl::string_view text, absl::string_view source);

// The inline form, -H host1,host2:2 (each entry as a file's line without options).
absl::StatusOr<std::vector<Host>> ParseHostList(absl::string_view list);

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
