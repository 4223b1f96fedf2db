#ifndef COHORT_TOOLS_LAUNCH_MEMBER_COMMANDS_H_
#define COHORT_TOOLS_LAUNCH_MEMBER_COMMANDS_H_

#include <string>
#include <utility>
#include <vector>

#include "tools/launch/child_process.h"
#include "tools/launch/job_env.h"
#include "tools/launch/launch_options.h"

namespace cohort::launch {

// The file the scheduler writes its port to, in its run folder.
inline constexpr char kSchedulerPortFile[] = "scheduler.port";
// Where the scheduler journals the job (--journal), in its run folder: a restarted scheduler
// takes the job over from it, and the launcher reads there whether the job is DONE.
inline constexpr char kSchedulerJournal[] = "scheduler.journal";
// Where members on the launcher's own machine listen and are dialled.
inline constexpr char kLoopback[] = "127.0.0.1";

// The host a member runs on (its index in options.hosts), or -1 for this machine.
int HostOf(const LaunchOptions& options, Role role, int rank);

// Where a member's port files go: the job's scratch folder here, its run folder on a host (which
// its wrapper makes, fills and removes).
std::string RunFolderOf(const LaunchOptions& options, const std::string& scratch_dir, Role role,
                        int rank);

// "shard-1-metrics.port": the file in a member's run folder it writes its metrics port to.
std::string MetricsPortFileName(Role role, int rank);

// The scheduler's program and flags. port: 0 for the system to pick one (a restarted scheduler
// gets its old one).
std::vector<std::string> SchedulerArgv(const LaunchOptions& options, int port);

// A shard's program and flags; `resume`: a restarted shard, from the job's checkpoints.
std::vector<std::string> ShardArgv(const LaunchOptions& options,
                                   const std::string& scheduler_address, int rank, bool resume);

// How to start one member.
struct MemberCommand {
  SpawnOptions spawn;  // the program here, or ssh to its host
  std::string host;    // its host's address; empty: this machine
  // A remote member's files for its run folder, as (name, path here): with TLS the job's CA,
  // the role's certificate and key, and the token (credentials.h reads them).
  std::vector<std::pair<std::string, std::string>> run_dir_files;
};

// The command that runs `argv` (argv[0] and the program's own flags) as a member of the job:
// where it listens, its port files, its security and the job's environment (job_env.h) are
// added; a member on another host runs under ssh and the wrapper of remote.h.
// scheduler_address: host:port, once known (empty for the scheduler at first).
MemberCommand MemberCommandOf(const LaunchOptions& options, const std::string& scratch_dir,
                              const std::string& scheduler_address, Role role, int rank,
                              const std::string& program, std::vector<std::string> argv);

}  // namespace cohort::launch

#endif  // COHORT_TOOLS_LAUNCH_MEMBER_COMMANDS_H_
