#!/usr/bin/python3
"""Jobs with many members: member_sim plays 256 workers of one job, all in one process,
against the real scheduler (plaintext, on 127.0.0.1):
- the control plane, with 16 simulated shards of an elastic job: the members register, the job
  runs, every worker passes 5 barriers, a worker is killed and one joins (two new generations
  every worker hears of), a worker in a process of its own joins and hangs (SIGSTOP) while the
  others wait for it at a barrier: the scheduler lets them go on within its heartbeat timeout
  and a second, and the workers' leaving ends the job DONE;
- the data path, with 2 real shard processes: every worker runs 20 dist_sync steps pushing -1
  for every element under SGD at rate 1, and checks that every element of every answer is the
  step number (no update lost, doubled or mixed), then the job ends DONE.

Usage: swarm_test.py SCHEDULER SHARD MEMBER_SIM
"""

import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

SCHEDULER, SHARD, MEMBER_SIM = (os.path.abspath(p) for p in sys.argv[1:4])
WORKERS, SHARDS = 256, 16


class SwarmTest(unittest.TestCase):
    def start_scheduler(self, shards, *flags):
        """The scheduler of a job of WORKERS workers and `shards` shards; its process and
        address."""
        folder = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(folder, "port")
        self.log = open(os.path.join(folder, "scheduler.log"), "w+")
        self.addCleanup(self.log.close)
        scheduler = self.spawn(
            [SCHEDULER, "--insecure", "--bind=127.0.0.1", f"--num_workers={WORKERS}",
             f"--num_shards={shards}", f"--port_file={port_file}", "--job_id=swarm", *flags],
            self.log)
        return scheduler, self.address_in(port_file)

    def address_in(self, port_file):
        """127.0.0.1 and the port a process writes to port_file, once it has."""
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            self.assertLess(time.monotonic(), deadline, f"nothing written to {port_file}")
            time.sleep(0.05)
        with open(port_file) as f:
            return f"127.0.0.1:{f.read().strip()}"

    def spawn(self, command, out):
        p = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        return p

    def simulate(self, scheduler, address, *flags):
        sim = subprocess.run([MEMBER_SIM, f"--scheduler={address}", f"--workers={WORKERS}",
                              "--barriers=5", f"--scheduler_pid={scheduler.pid}", "--idle_s=1",
                              *flags], capture_output=True, text=True, timeout=300)
        self.assertEqual(sim.returncode, 0, sim.stderr)
        self.assertEqual(scheduler.wait(timeout=60), 0)
        self.log.seek(0)
        self.assertRegex(self.log.read(), rf"(?m)^scheduler: job DONE: all {WORKERS} workers "
                                          r"finished$")
        return sim.stdout

    def test_256_simulated_workers_form_change_generations_and_end_done(self):
        http_file = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "http")
        scheduler, address = self.start_scheduler(
            SHARDS, "--on_worker_failure=elastic", "--min_workers=1",
            f"--max_workers={WORKERS + 1}", f"--metrics_port_file={http_file}")
        out = self.simulate(scheduler, address, f"--shards={SHARDS}", "--elastic", "--hang",
                            f"--scheduler_http={self.address_in(http_file)}")
        # Hosts of 8 simulated workers meet there first: one call a host reaches the scheduler.
        self.assertIn("the scheduler took 32 barrier calls a round for 256 arrivals", out)
        # The killed worker's place went to the one that joined: 256 finished.
        self.assertRegex(out, rf"member_sim: {WORKERS} workers, {SHARDS} shards: registered in "
                              r"[\d.]+ s, RUNNING at [\d.]+ s; barrier p50 [\d.]+ ms, p99 "
                              r"[\d.]+ ms \(5 rounds[^)]*\); idle scheduler [\d.]+% of a core.*; a "
                              r"worker killed: every other one in the next generation [\d.]+ s "
                              r"later; one joining: every worker in the next [\d.]+ s later")
        # The scheduler's --heartbeat_timeout is 3 s.
        hung = float(re.search(r"a worker hung: the others let go of its barrier ([\d.]+) s "
                               r"after it stopped", out).group(1))
        self.assertLess(hung, 3 + 1, out)

    def test_256_simulated_workers_count_every_element_right_on_real_shards(self):
        scheduler, address = self.start_scheduler(2)
        folder = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_files = [os.path.join(folder, f"shard-{r}.http") for r in range(2)]
        shards = [self.spawn([SHARD, "--insecure", "--bind=127.0.0.1", f"--scheduler={address}",
                              f"--rank={r}", f"--metrics_port_file={port_files[r]}"],
                             subprocess.DEVNULL) for r in range(2)]
        metrics = [self.address_in(port_file) for port_file in port_files]
        out = self.simulate(scheduler, address, "--shards=0", "--data_steps=20",
                            "--shard_pids=" + ",".join(str(s.pid) for s in shards),
                            "--shard_metrics=" + ",".join(metrics))
        self.assertRegex(out, r"20 dist_sync steps counted right in [\d.]+ s; a step's answers "
                              r".*; an update \(256 pushes summed in rank order, SGD\) .*; each "
                              r"shard \+[\d.]+ MiB with its 256 worker streams, [\d.]+ MiB of it "
                              r"the pushes an update sums: -?\d+ KiB a stream besides")
        for s in shards:
            self.assertEqual(s.wait(timeout=60), 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
