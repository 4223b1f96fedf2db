"""A real one-node Slurm cluster for tests: Debian's munged, slurmctld and slurmd (22.05) started
as root in a folder of their own (their own munge key and socket, ports, state and logs), found
by SLURM_CONF, and stopped by their PIDs. `srun`/`sbatch` with more tasks than CPUs need
--overcommit (proctrack/linuxproc, task/none: no cgroups needed).

    with SlurmCluster(folder) as slurm:
        subprocess.run(["sbatch", ...], env=slurm.env)
"""

import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import time

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def why_not():
    """Why a Slurm cluster cannot start here, or None."""
    if os.geteuid() != 0:
        return "needs root to run Slurm's daemons"
    for tool in DAEMONS:
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            return f"needs {tool} (Debian's slurm-wlm and munge; tools/install_deps.sh)"
    return None


def _tool(name):
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port_pair():
    """Two consecutive ports nothing listens on now (Slurm's daemons bind them themselves)."""
    for _ in range(100):
        port = random.randrange(20000, 30000)
        ok = True
        for p in (port, port + 1):
            with socket.socket() as s:
                try:
                    s.bind(("0.0.0.0", p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no two free ports for slurmctld and slurmd")


class SlurmCluster:
    def __init__(self, folder, nodes=1):
        """nodes > 1: that many Slurm nodes on this machine (n1, n2, ...), a slurmd each on a
        port of its own, every one with all the machine's CPUs."""
        self.dir = folder
        self.nodes = nodes
        self.node = socket.gethostname().split(".")[0]
        self.procs = []
        self.env = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self):
        for sub in ("state", "spool", "munge"):
            os.makedirs(self.path(sub), exist_ok=True)
        os.chmod(self.path("munge"), 0o700)
        subprocess.run([_tool("mungekey"), "--create", "--keyfile", self.path("munge/munge.key")],
                       check=True, capture_output=True)
        self.socket = self.path("munge/munge.socket")
        self.procs.append(subprocess.Popen(
            [_tool("munged"), "--foreground", "--force", f"--key-file={self.path('munge/munge.key')}",
             f"--socket={self.socket}", f"--pid-file={self.path('munge/munged.pid')}",
             f"--log-file={self.path('munge/munged.log')}",
             f"--seed-file={self.path('munge/munged.seed')}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait_for(lambda: os.path.exists(self.socket), "munged's socket")
        port = _free_port_pair()
        cpus = os.cpu_count()
        if self.nodes == 1:
            names = [self.node]
            node_lines = f"NodeName={self.node} CPUs={cpus} State=UNKNOWN"
        else:
            names = [f"n{i + 1}" for i in range(self.nodes)]
            node_lines = "\n".join(
                f"NodeName={name} NodeHostname={self.node} NodeAddr=127.0.0.1 "
                f"Port={_free_port_pair()} CPUs={cpus} State=UNKNOWN" for name in names)
        with open(self.path("slurm.conf"), "w") as f:
            f.write(f"""ClusterName=cohorttest
SlurmctldHost={self.node}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
SlurmctldPort={port}
SlurmdPort={port + 1}
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}/%n
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd')}-%n.pid
SlurmctldLogFile={self.path('slurmctld.log')}
SlurmdLogFile={self.path('slurmd')}-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
KillWait=5
{node_lines}
PartitionName=debug Nodes={",".join(names)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        for name in names:
            os.makedirs(os.path.join(self.path("spool"), name), exist_ok=True)
        self.env = dict(os.environ, SLURM_CONF=self.path("slurm.conf"))
        daemons = [("slurmctld", [])] + [
            (f"slurmd-{name}", [] if self.nodes == 1 else ["-N", name]) for name in names]
        for name, args in daemons:
            self.procs.append(subprocess.Popen(
                [_tool(name.split("-")[0]), "-D", "-f", self.path("slurm.conf"), *args],
                env=self.env, stdout=open(self.path(f"{name}.out"), "wb"),
                stderr=subprocess.STDOUT))
        self._wait_for(self._nodes_idle, f"{len(names)} nodes idle in sinfo")

    def _nodes_idle(self):
        r = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%t"], env=self.env,
                           capture_output=True, text=True)
        return r.returncode == 0 and r.stdout.split() == ["idle"] * self.nodes

    def _wait_for(self, ready, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited ({p.returncode}) waiting for {what}: "
                                       f"{self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"no {what} within {timeout} s: {self.logs()}")

    def logs(self):
        text = []
        for path in sorted(glob.glob(self.path("slurm*.out")) + glob.glob(self.path("slurm*.log"))):
            with open(path, errors="replace") as f:
                text.append(f"--- {os.path.basename(path)}\n" + f.read()[-3000:])
        return "\n".join(text)

    def stop(self):
        """Cancels every job, then stops the daemons by their PIDs (slurmd, slurmctld, munged)."""
        if self.env is not None:
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env,
                           capture_output=True)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
