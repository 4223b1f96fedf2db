"""A real one-node Slurm cluster for tests: Debian's munged, slurmctld and slurmd (22.05) started
as root in a folder of their own (their own munge key and socket, ports, state and logs), found
by SLURM_CONF, and stopped by their PIDs. `srun`/`sbatch` with more tasks than CPUs need
--overcommit (proctrack/linuxproc, task/none: no cgroups needed).

    with SlurmCluster(folder) as slurm:
        subprocess.run(["sbatch", ...], env=slurm.env)
"""

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
    def __init__(self, folder):
        self.dir = folder
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
SlurmdSpoolDir={self.path('spool')}
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd.pid')}
SlurmctldLogFile={self.path('slurmctld.log')}
SlurmdLogFile={self.path('slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
KillWait=5
NodeName={self.node} CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        self.env = dict(os.environ, SLURM_CONF=self.path("slurm.conf"))
        for daemon in ("slurmctld", "slurmd"):
            self.procs.append(subprocess.Popen(
                [_tool(daemon), "-D", "-f", self.path("slurm.conf")], env=self.env,
                stdout=open(self.path(f"{daemon}.out"), "wb"), stderr=subprocess.STDOUT))
        self._wait_for(self._node_idle, f"node {self.node} idle in sinfo")

    def _node_idle(self):
        r = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=self.env,
                           capture_output=True, text=True)
        return r.returncode == 0 and r.stdout.strip() == "idle"

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
        for name in ("slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            try:
                with open(self.path(name)) as f:
                    text.append(f"--- {name}\n" + f.read()[-3000:])
            except OSError:
                pass
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
