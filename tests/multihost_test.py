#!/usr/bin/python3
"""Jobs on several hosts: three hosts in network namespaces on one bridge (and a fourth for the
launcher), each with its own host name, its own /tmp-like sync folder (a tmpfs) and Debian's
sshd with throwaway keys; the real launcher starts jobs there over ssh with mutual TLS.

- a LeNet job (1 scheduler, 3 shards, 3 workers) copied with --sync_dst_dir trains into the
  local job's accuracy band, every line prefixed with its host;
- every process of one host killed mid-job: the launcher names the member and its host, and no
  process of the job remains on any host;
- a shard killed on its host mid-job (--restart_failed_shards): the launcher starts it again
  there over ssh, from the newest complete checkpoint, and the job ends DONE;
- one host's link cut mid-job: the job fails naming a member of that host within the heartbeat
  deadline, and every process on every host is gone after the grace periods;
- a LeNet job from RecordIO shards split by files: each host receives every index but only the
  .rec files its workers read, and the job trains from them.

Needs root (network namespaces); skipped with a message otherwise.
Usage: multihost_test.py LAUNCH JOB_PROCESSES_PY WRITE_IMAGES PACK_RECORDS
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

LAUNCH, JOB_PROCESSES, WRITE_IMAGES, PACK_RECORDS = (os.path.abspath(p) for p in sys.argv[1:5])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job_processes import environ_of, job_pids, kill_job, wait_job_gone  # noqa: E402
from netns_cluster import IP, SSHD, Cluster, pids_in_netns, run  # noqa: E402

HOSTS = 3


@unittest.skipUnless(os.geteuid() == 0, "needs root to make network namespaces")
@unittest.skipUnless(os.path.exists(SSHD), "needs Debian's openssh-server")
class MultiHostTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.cluster = Cluster(self.dir, HOSTS)
        self.addCleanup(self.cluster.stop)
        self.cluster.start()
        self.job_id = f"mh-{os.getpid()}-{self.id().rsplit('.', 1)[-1]}"
        self.addCleanup(kill_job, self.job_id)
        self.hosts_file = os.path.join(self.dir, "hosts")
        a = self.cluster.addresses
        with open(self.hosts_file, "w") as f:
            f.write(f"# the job's hosts\r\n{a[0]} slots=1\r\n\r\n{a[1]}:1  \n{a[2]}\n")
        self.output = os.path.join(self.dir, "output.txt")

    def launch(self, *worker_flags, extra=(), dataset="fashion-mnist"):
        command = self.cluster.in_launcher_ns([
            LAUNCH, f"--job_id={self.job_id}", "-n", "3", "-s", "3", "-H", self.hosts_file,
            f"--ssh_identity={self.cluster.identity}",
            "--ssh_options=" + " ".join(self.cluster.ssh_args()[2:]),
            "--env=OMP_NUM_THREADS=1", *extra, "--", "--model=lenet", f"--dataset={dataset}",
            "--output=", *worker_flags])
        self.out = open(self.output, "wb")
        # The launcher's own PATH is Bazel's strict one; ssh and rsync are in /usr/bin.
        p = subprocess.Popen(command, stdout=self.out, stderr=subprocess.STDOUT, cwd=self.dir)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        return p

    def text(self):
        with open(self.output, errors="replace") as f:
            return f.read()

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text(), re.M):
                return
            time.sleep(0.1)
        self.fail(f"no line matching {pattern!r} within {timeout} s:\n{self.text()}")

    def assert_nothing_left(self, timeout, folders=True):
        left = wait_job_gone(self.job_id, timeout)
        where = {ns: pids_in_netns(left, ns) for ns in self.cluster.hosts}
        self.assertEqual(left, [], f"still running, by host: {where}\n{self.text()}")
        if not folders:
            return
        self.assertEqual([d for d in os.listdir("/tmp") if d.startswith(f"cohort-{self.job_id}")],
                         [], "remote run folders left behind")

    def test_lenet_over_ssh_with_mutual_tls_learns(self):
        a = self.cluster.addresses
        p = self.launch("--epochs=1", "--batch_size=64",
                        extra=[f"--sync-dst-dir={self.cluster.sync_dir}"])
        self.assertEqual(p.wait(timeout=900), 0, self.text())
        out = self.text()
        self.assertIn(f"launch: copying {self.dir} and 3 programs to {self.cluster.sync_dir} on "
                      "3 host(s)", out)
        self.assertRegex(out, rf"scheduler at {re.escape(a[0])}:\d+ .*3 shards, 3 workers on 3 "
                              r"hosts, mutual TLS")
        # Placement as launch.py: the scheduler on the first host, shards and workers in turn.
        for role, rank, host in [("shard", 0, 0), ("shard", 2, 2), ("worker", 1, 1)]:
            self.assertRegex(out, rf"\[{re.escape(a[host])} {role} {rank}\] ")
        self.assertIn(f"[{a[0]} scheduler] scheduler: job DONE: all 3 workers finished", out)
        top1 = float(re.search(rf"\[{re.escape(a[0])} worker 0\] Test top-1 ([\d.]+)%",
                               out).group(1))
        self.assertGreaterEqual(top1, 80.0, out)  # one epoch, as the local job's test
        self.assertNotIn("refused", out)
        self.assert_nothing_left(10)

    def test_recordio_shards_reach_only_the_hosts_whose_workers_read_them(self):
        # The data lies outside the launcher's working directory, which is copied whole.
        data = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, data, ignore_errors=True)
        images, records = os.path.join(data, "fm"), os.path.join(data, "rec")
        for command in ([WRITE_IMAGES, "--dataset=fashion-mnist", f"--out={images}",
                         "--train_samples=9000", "--test_samples=1000"],
                        [PACK_RECORDS, f"--images={images}", f"--list={images}/train.lst",
                         f"--prefix={records}/train", "--shard_mb=1"],
                        [PACK_RECORDS, f"--images={images}", f"--list={images}/val.lst",
                         f"--prefix={records}/val"]):
            subprocess.run(command, check=True, capture_output=True, timeout=300)
        files = len([f for f in os.listdir(records) if f.startswith("train-") and f.endswith(".rec")])
        self.assertGreaterEqual(files, 4)
        sync = self.cluster.sync_dir
        p = self.launch("--epochs=1", "--data_partition=files", "--num_classes=10",
                        "--image_channels=1", "--image_size=28", "--eval_resize=28",
                        "--image_mean=0.286", "--image_std=0.353",
                        dataset=f"recordio:{records}/train", extra=[f"--sync-dst-dir={sync}"])
        self.assertEqual(p.wait(timeout=900), 0, self.text())
        out = self.text()
        self.assertIn(f"launch: copying the data of recordio:{records}/train, its {files} .rec "
                      f"files shared out by rank (", out)
        # Worker r runs on host r: it holds every index, its own .rec files and the validation.
        for rank, address in enumerate(self.cluster.addresses):
            listed = subprocess.run(
                self.cluster.in_launcher_ns(["ssh", *self.cluster.ssh_args(), address, "ls",
                                             f"{sync}/.cohort-data{records}"]),
                capture_output=True, text=True, timeout=60)
            held = set(listed.stdout.split())
            self.assertEqual({f for f in held if f.startswith("train-") and f.endswith(".rec")},
                             {f"train-{f:05d}.rec" for f in range(rank, files, 3)}, listed.stderr)
            self.assertEqual(len([f for f in held if f.endswith(".idx")]), files + 1)
            self.assertIn("val-00000.rec", held)
            self.assertRegex(out, rf"\[{re.escape(address)} worker {rank}\] train: rank {rank} of 3 "
                                  rf"reads files ")
        top1 = float(re.search(r"worker 0\] Test top-1 ([\d.]+)%", out).group(1))
        self.assertGreaterEqual(top1, 65.0, out)
        self.assert_nothing_left(10)

    def test_killing_every_process_of_a_host_fails_the_job_and_leaves_nothing(self):
        a = self.cluster.addresses
        p = self.launch("--epochs=20", "--log_interval=20")
        self.wait_for(rf"^\[{re.escape(a[0])} worker 0\]\s+20\s+0\s", 300)
        victims = pids_in_netns(job_pids(self.job_id), self.cluster.hosts[2])
        self.assertTrue(victims, "no process of the job on the third host")
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        self.assertNotEqual(p.wait(timeout=60), 0, self.text())
        self.assertLess(time.monotonic() - killed, 20, self.text())
        out = self.text()
        # The scheduler names a member that died there, even when a worker on a live host lost
        # the dead shard first, and the launcher names its host.
        self.assertRegex(out, r"job FAILED: (worker|shard) 2 \(host [^)]*\) is dead")
        self.assertRegex(out, rf"launch: (worker|shard) 2 on {re.escape(a[2])} \(ssh pid \d+\)")
        # The killed wrappers could not remove their folders, as after a host's crash (the next
        # member started on the host removes them: remote_test).
        self.assert_nothing_left(15, folders=False)

    def test_a_killed_remote_shard_is_restarted_over_ssh(self):
        a = self.cluster.addresses
        ckpt = os.path.join(self.dir, "ckpt")  # one filesystem under every namespace
        p = self.launch("--train_samples=6400", "--batch_size=32", "--epochs=3",
                        "--log_interval=20",
                        extra=["--restart_failed_shards", f"--checkpoint_dir={ckpt}",
                               "--checkpoint_every=20"])
        self.wait_for(rf"^\[{re.escape(a[2])} shard 2\] shard 2: checkpoint at step 40 written",
                      300)
        # The shard itself, not its wrapper (which carries its environment too).
        shard = [pid for pid in pids_in_netns(job_pids(self.job_id), self.cluster.hosts[2])
                 if environ_of(pid).get("COHORT_ROLE") == "shard" and
                 os.readlink(f"/proc/{pid}/exe").endswith("/shard")]
        self.assertEqual(len(shard), 1, self.text())
        os.kill(shard[0], signal.SIGKILL)
        self.assertEqual(p.wait(timeout=300), 0, self.text())
        out = self.text()
        self.assertRegex(out, rf"launch: shard 2 on {re.escape(a[2])} \(ssh pid \d+\) was killed "
                              r"by signal 9 \(Killed\); restarting it from the newest complete "
                              r"checkpoint")
        self.assertRegex(out, rf"\[{re.escape(a[2])} shard 2\] shard 2: resuming from step \d+")
        self.assertIn(f"[{a[0]} scheduler] scheduler: job DONE: all 3 workers finished", out)
        self.assert_nothing_left(10)

    def test_a_cut_link_fails_the_job_naming_the_unreachable_member(self):
        a = self.cluster.addresses
        p = self.launch("--epochs=20", "--log_interval=20")
        self.wait_for(rf"^\[{re.escape(a[0])} worker 0\]\s+20\s+0\s", 300)
        run(IP, "-n", self.cluster.switch, "link", "set", self.cluster.veth(2), "down")
        cut = time.monotonic()
        self.wait_for(r"job FAILED: (worker|shard) 2 ", 30)
        self.assertLess(time.monotonic() - cut, 15, self.text())  # 3 s deadline, busy machine
        self.assertNotEqual(p.wait(timeout=60), 0, self.text())
        # The cut host's processes stop on their own: the scheduler's grace period, the
        # wrapper's silent launcher.
        self.assert_nothing_left(20)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
