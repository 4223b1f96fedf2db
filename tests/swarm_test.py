#!/usr/bin/python3
"""The control plane with many members: member_sim plays 256 workers and 16 shards of one
elastic job against the real scheduler (plaintext, on 127.0.0.1), all in one process: they
register, the job runs, every worker passes 5 barriers, a worker is killed and one joins (two
new generations every worker hears of), and the workers' leaving ends the job DONE.

Usage: swarm_test.py SCHEDULER MEMBER_SIM
"""

import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

SCHEDULER, MEMBER_SIM = (os.path.abspath(p) for p in sys.argv[1:3])
WORKERS, SHARDS = 256, 16


class SwarmTest(unittest.TestCase):
    def test_256_simulated_workers_run_a_job_to_done(self):
        folder = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        port_file = os.path.join(folder, "port")
        with open(os.path.join(folder, "scheduler.log"), "w+") as log:
            scheduler = subprocess.Popen(
                [SCHEDULER, "--insecure", "--bind=127.0.0.1", f"--num_workers={WORKERS}",
                 f"--num_shards={SHARDS}", "--on_worker_failure=elastic", "--min_workers=1",
                 f"--max_workers={WORKERS + 1}", f"--port_file={port_file}", "--job_id=swarm"],
                stdout=log, stderr=subprocess.STDOUT)
            self.addCleanup(lambda: scheduler.poll() is None and (scheduler.kill(),
                                                                   scheduler.wait()))
            deadline = time.monotonic() + 30
            while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
                self.assertLess(time.monotonic(), deadline, "the scheduler wrote no port file")
                time.sleep(0.05)
            with open(port_file) as f:
                port = f.read().strip()
            sim = subprocess.run(
                [MEMBER_SIM, f"--scheduler=127.0.0.1:{port}", f"--workers={WORKERS}",
                 f"--shards={SHARDS}", "--barriers=5", f"--scheduler_pid={scheduler.pid}",
                 "--idle_s=1", "--elastic"], capture_output=True, text=True, timeout=300)
            self.assertEqual(sim.returncode, 0, sim.stderr)
            self.assertRegex(sim.stdout, rf"member_sim: {WORKERS} workers, {SHARDS} shards: "
                                         r"registered in [\d.]+ s, RUNNING at [\d.]+ s; barrier "
                                         r"p50 [\d.]+ ms, p99 [\d.]+ ms \(5 rounds\); idle "
                                         r"scheduler [\d.]+% of a core.*; a worker killed: "
                                         r"every other one in the next generation [\d.]+ s "
                                         r"later; one joining: every worker in the next [\d.]+ "
                                         r"s later")
            self.assertEqual(scheduler.wait(timeout=60), 0)
            log.seek(0)
            # The killed worker's place went to the one that joined.
            self.assertRegex(log.read(), rf"(?m)^scheduler: job DONE: all {WORKERS} workers "
                                         r"finished$")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
