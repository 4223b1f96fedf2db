// shm_ring_bench: the round trip of a message between two processes over shared-memory rings
// (services/wire/shm_ring.h), the carrier a worker and a shard on one host could use instead of
// gRPC, to set beside bench_ps's unfused 4 KB round trip in the same sitting.
//   bazel run -c opt //tools/bench:shm_ring_bench
// A child process echoes every message back on a second ring. Each size's line gives medians
// over 5 rounds of N messages: the round trip with one message in flight at a time and the CPU
// time both processes spent on it (each side sleeps and is woken every time), and the time per
// message with a thread sending all N while the main thread takes the echoes (as a worker's
// pushes and the shard's answers flow, and as bench_ps counts a 4 KB tensor's round trip).

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "services/wire/shm_ring.h"
#include "tools/bench/proc_usage.h"

namespace {

using cohort::ShmRing;

double CpuSeconds(pid_t pid) { return absl::ToDoubleSeconds(cohort::ProcessCpuTime(pid)); }

ShmRing::Fds Dup(const ShmRing::Fds& fds) { return {dup(fds.memory), dup(fds.data), dup(fds.space)}; }

// The child: echoes until the ring closes, or the parent (at the other end of `parent`) is gone.
[[noreturn]] void Echo(const ShmRing::Fds& in_fds, const ShmRing::Fds& out_fds, int parent) {
  auto in = ShmRing::Attach(Dup(in_fds));
  auto out = ShmRing::Attach(Dup(out_fds));
  if (!in.ok() || !out.ok()) _exit(2);
  (*in)->WatchPeer(parent);
  (*out)->WatchPeer(parent);
  for (;;) {
    auto m = (*in)->Read();
    if (!m.ok()) _exit(m.status().code() == absl::StatusCode::kCancelled ? 0 : 3);
    const absl::Status echoed = (*out)->Write(m->bytes());
    (*in)->Release();
    if (!echoed.ok()) _exit(4);
  }
}

}  // namespace

int main() {
  auto there = ShmRing::Create(size_t{16} << 20);
  auto back = ShmRing::Create(size_t{16} << 20);
  if (!there.ok() || !back.ok()) {
    std::fprintf(stderr, "shm_ring_bench: %s\n",
                 std::string((there.ok() ? back.status() : there.status()).message()).c_str());
    return 1;
  }
  // Each side's waits watch the other process, so neither waits for ever on one that failed.
  int peer[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, peer) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(peer[0]);
    Echo((*there)->fds(), (*back)->fds(), peer[1]);
  }
  close(peer[1]);
  (*there)->WatchPeer(peer[0]);
  (*back)->WatchPeer(peer[0]);

  std::printf("%10s %8s %18s %14s %18s\n", "bytes", "messages", "one at a time: us",
              "CPU us", "pipelined: us each");
  for (size_t bytes : {size_t{4} << 10, size_t{64} << 10, size_t{245} << 10, size_t{1} << 20}) {
    const std::string payload(bytes, 'x');
    const absl::Span<const char> piece(payload);
    const int messages = bytes <= (64 << 10) ? 20000 : 2000;
    auto send = [&] { return (*there)->Write(absl::MakeConstSpan(&piece, 1)).ok(); };
    auto receive = [&] {
      auto m = (*back)->Read();
      if (!m.ok()) return false;
      (*back)->Release();
      return true;
    };
    std::vector<double> trips, cpu, pipelined;
    for (int round = 0; round < 6; ++round) {
      const double cpu_start = CpuSeconds(getpid()) + CpuSeconds(child);
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < messages; ++i) {
        if (!send() || !receive()) return 1;
      }
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          messages;
      const double cpu_us =
          (CpuSeconds(getpid()) + CpuSeconds(child) - cpu_start) * 1e6 / messages;
      // As a worker's pushes go: a thread keeps sending while this one takes the answers.
      start = std::chrono::steady_clock::now();
      bool sent = true;
      std::thread sender([&] {
        for (int i = 0; i < messages && sent; ++i) sent = send();
        if (!sent) (*back)->Close();  // no more echoes come: the receiving loop stops
      });
      bool received = true;
      for (int i = 0; i < messages && received; ++i) received = receive();
      sender.join();
      if (!sent || !received) return 1;
      const double each =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count() /
          messages;
      if (round > 0) {  // the first round faults the rings' pages in
        trips.push_back(us);
        cpu.push_back(cpu_us);
        pipelined.push_back(each);
      }
    }
    for (auto* v : {&trips, &cpu, &pipelined}) std::sort(v->begin(), v->end());
    std::printf("%10zu %8d %18.1f %14.1f %18.1f\n", bytes, messages, trips[trips.size() / 2],
                cpu[cpu.size() / 2], pipelined[pipelined.size() / 2]);
  }
  (*there)->Close();
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
