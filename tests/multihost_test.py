#!/usr/bin/python3
"""Jobs on several hosts: three hosts in network namespaces on one bridge (and a fourth for the
launcher), each with its own host name, its own /tmp-like sync folder (a tmpfs) and Debian's
sshd with throwaway keys; the real launcher starts jobs there over ssh with mutual TLS.

- a LeNet job (1 scheduler, 3 shards, 3 workers) copied with --sync_dst_dir trains into the
  local job's accuracy band, every line prefixed with its host;
- every process of one host killed mid-job: the launcher names the member and its host, and no
  process of the job remains on any host;
- one host's link cut mid-job: the job fails naming a member of that host within the heartbeat
  deadline, and every process on every host is gone after the grace periods.

Needs root (network namespaces); skipped with a message otherwise.
Usage: multihost_test.py LAUNCH JOB_PROCESSES_PY
"""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

LAUNCH, JOB_PROCESSES = (os.path.abspath(p) for p in sys.argv[1:3])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
from job_processes import job_pids, kill_job, wait_job_gone  # noqa: E402

IP = "/usr/sbin/ip"
SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
HOSTS = 3


def run(*command):
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def netns_inode(name):
    return os.stat(f"/run/netns/{name}").st_ino


def pids_in_netns(pids, name):
    inode = netns_inode(name)
    out = []
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode:
                out.append(pid)
        except OSError:
            pass
    return out


class Cluster:
    """Hosts h1..hN at 10.A.B.1..N, and the launcher's namespace at 10.A.B.100."""

    def __init__(self, root):
        self.root = root
        self.tag = f"{os.getpid() % 10000}{random.randrange(100, 1000)}"
        a, b = random.randrange(64, 250), random.randrange(1, 250)
        self.addresses = [f"10.{a}.{b}.{i + 1}" for i in range(HOSTS)]
        self.launcher_address = f"10.{a}.{b}.100"
        self.switch = f"co{self.tag}sw"
        self.hosts = [f"co{self.tag}h{i + 1}" for i in range(HOSTS)]
        self.launcher_ns = f"co{self.tag}l"
        self.sync_dir = os.path.join(root, "sync")
        self.identity = os.path.join(root, "id")
        self.sshd = []
        self.namespaces = []

    def veth(self, i):
        return f"v{self.tag}{i}"  # the switch side of host i's link (i = HOSTS: the launcher's)

    def start(self):
        run(IP, "netns", "add", self.switch)
        self.namespaces.append(self.switch)
        run(IP, "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run(IP, "-n", self.switch, "link", "set", "br0", "up")
        for i, (ns, address) in enumerate(zip(self.hosts + [self.launcher_ns],
                                               self.addresses + [self.launcher_address])):
            run(IP, "netns", "add", ns)
            self.namespaces.append(ns)
            run(IP, "link", "add", self.veth(i), "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            run(IP, "link", "set", self.veth(i), "netns", self.switch)
            run(IP, "-n", self.switch, "link", "set", self.veth(i), "master", "br0", "up")
            run(IP, "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            run(IP, "-n", ns, "link", "set", "eth0", "up")
            run(IP, "-n", ns, "link", "set", "lo", "up")
        run(SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", self.identity)
        run(SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.root, "host_key"))
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation folder
        os.makedirs(self.sync_dir, exist_ok=True)
        for i, (ns, address) in enumerate(zip(self.hosts, self.addresses)):
            config = os.path.join(self.root, f"sshd{i + 1}.conf")
            with open(config, "w") as f:
                f.write(f"ListenAddress {address}\nPort 22\n"
                        f"HostKey {self.root}/host_key\n"
                        f"AuthorizedKeysFile {self.identity}.pub\n"
                        f"PidFile {self.root}/sshd{i + 1}.pid\n"
                        "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
                        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                        "PrintMotd no\nLogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n")
            log = open(os.path.join(self.root, f"sshd{i + 1}.log"), "wb")
            # Its own host name and its own sync folder, as a separate machine would have.
            self.sshd.append(subprocess.Popen(
                [IP, "netns", "exec", ns, "unshare", "--uts", "--mount", "--propagation",
                 "private", "sh", "-c",
                 f"hostname h{i + 1} && mount -t tmpfs tmpfs {self.sync_dir} && "
                 f"exec {SSHD} -D -e -f {config}"],
                stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 20
        for address in self.addresses:
            while subprocess.run(self.in_launcher_ns(["ssh", *self.ssh_args(), address, "true"]),
                                 capture_output=True, timeout=30).returncode != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd on {address} does not answer")
                time.sleep(0.2)

    def ssh_args(self):
        return ["-i", self.identity, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]

    def in_launcher_ns(self, command):
        return [IP, "netns", "exec", self.launcher_ns, *command]

    def stop(self):
        # Everything still running in our namespaces is ours (sshd, its sessions, the job).
        for ns in self.namespaces:
            r = subprocess.run([IP, "netns", "pids", ns], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for p in self.sshd:
            p.kill()
            p.wait()
        for ns in self.namespaces:
            subprocess.run([IP, "netns", "del", ns], capture_output=True)


@unittest.skipUnless(os.geteuid() == 0, "needs root to make network namespaces")
@unittest.skipUnless(os.path.exists(SSHD), "needs Debian's openssh-server")
class MultiHostTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.cluster = Cluster(self.dir)
        self.addCleanup(self.cluster.stop)
        self.cluster.start()
        self.job_id = f"mh-{os.getpid()}-{self.id().rsplit('.', 1)[-1]}"
        self.addCleanup(kill_job, self.job_id)
        self.hosts_file = os.path.join(self.dir, "hosts")
        a = self.cluster.addresses
        with open(self.hosts_file, "w") as f:
            f.write(f"# the job's hosts\r\n{a[0]} slots=1\r\n\r\n{a[1]}:1  \n{a[2]}\n")
        self.output = os.path.join(self.dir, "output.txt")

    def launch(self, *worker_flags, extra=()):
        command = self.cluster.in_launcher_ns([
            LAUNCH, f"--job_id={self.job_id}", "-n", "3", "-s", "3", "-H", self.hosts_file,
            f"--ssh_identity={self.cluster.identity}",
            "--ssh_options=" + " ".join(self.cluster.ssh_args()[2:]),
            "--env=OMP_NUM_THREADS=1", *extra, "--", "--model=lenet", "--dataset=fashion-mnist",
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
        # The scheduler names the member that died (or, when a worker's stream to it broke
        # first, the dead shard and its address), and the launcher names its host.
        self.assertRegex(out, rf"job FAILED: ((worker|shard) 2 .*dead|.*shard 2 at "
                              rf"{re.escape(a[2])}:\d+)")
        self.assertRegex(out, rf"launch: (worker|shard) 2 on {re.escape(a[2])} \(ssh pid \d+\)")
        # The killed wrappers could not remove their folders, as after a host's crash (the next
        # member started on the host removes them: remote_test).
        self.assert_nothing_left(15, folders=False)

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
