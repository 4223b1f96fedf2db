"""Hosts in network namespaces for multi-host tests and benchmarks: N hosts and the launcher's
namespace on one bridge, each host with its own host name (hN), its own tmpfs sync folder and
Debian's sshd with throwaway keys. Needs root. Everything it starts runs inside its namespaces,
and stop() ends it all by PID and deletes the namespaces.
"""

import os
import random
import signal
import subprocess
import time

IP = "/usr/sbin/ip"
SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
TC = "/usr/sbin/tc"


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

    def __init__(self, root, hosts=3):
        self.root = root
        self.count = hosts
        self.tag = f"{os.getpid() % 10000}{random.randrange(100, 1000)}"
        a, b = random.randrange(64, 250), random.randrange(1, 250)
        self.addresses = [f"10.{a}.{b}.{i + 1}" for i in range(self.count)]
        self.launcher_address = f"10.{a}.{b}.100"
        self.switch = f"co{self.tag}sw"
        self.hosts = [f"co{self.tag}h{i + 1}" for i in range(self.count)]
        self.launcher_ns = f"co{self.tag}l"
        self.sync_dir = os.path.join(root, "sync")
        self.identity = os.path.join(root, "id")
        self.sshd = []
        self.namespaces = []

    def veth(self, i):
        return f"v{self.tag}{i}"  # the switch side of host i's link (i = count: the launcher's)

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

    def shape(self, rate, burst="256kb"):
        """Limits every host's link to `rate` (tc's syntax, e.g. 1gbit) each way: tbf on the
        host's end (what it sends) and on the bridge's end (what it receives). A fast rate
        needs a burst of about a millisecond's bytes to be reached."""
        for i, ns in enumerate(self.hosts):
            for namespace, dev in ((ns, "eth0"), (self.switch, self.veth(i))):
                run(TC, "-n", namespace, "qdisc", "replace", "dev", dev, "root", "tbf",
                    "rate", rate, "burst", burst, "latency", "20ms")

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
