"""cohortrun: starts a Cohort job the way horovodrun and torchrun users start theirs.

    cohortrun -np 4 python train.py --epochs 3             # 4 workers (and 4 shards) here
    cohortrun -np 8 -H node1:4,node2:4 python train.py     # over ssh, 4 slots a host
    cohortrun -np 8 --hostfile hosts python train.py       # lines 'node1 slots=4'
    cohortrun --nproc-per-node 2 python train.py           # torchrun's habit
    cohortrun -np 4 --min-np 2 --checkpoint_dir=ckpt --checkpoint_every=20 python train.py
                                                           # elastic (hvd.elastic)
    python -m cohort.run -np 2 python train.py             # the same, without the entry point

It runs the launcher the package carries (the scheduler, the shards and the workers; the
program after the options is each worker's; `python` or `python3` there is the interpreter
cohortrun runs in). Options: -np N (workers), -H HOSTS, --hostfile
FILE, --nproc-per-node K (K workers on each host, or here), -s N / --num-shards N (default: one
per worker), --min-np M and --max-np N (an elastic job going on while M workers remain, at most
N at a time: --on_worker_failure=elastic --min_workers=M --max_workers=N, with checkpoints the
workers regroup on); any other launcher option in its --name=value form (launch --help lists them),
e.g. --shard_replicas=2 --restart_failed_shards.
"""

import os
import re
import sys

USAGE = ("usage: cohortrun [-np N] [-H HOSTS | --hostfile FILE] [--nproc-per-node K] "
         "[-s N] [--min-np M] [--max-np N] [--launcher_option=value ...] PROGRAM [ARGS ...]")


class UsageError(Exception):
    pass


def _bin_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _launcher():
    """The launcher binary: the package's (an installed wheel), or $COHORT_LAUNCH."""
    path = os.environ.get("COHORT_LAUNCH") or os.path.join(_bin_dir(), "launch")
    if not os.access(path, os.X_OK):
        raise UsageError(f"no launcher at {path}: install the wheel (bazel build //python:wheel; "
                         "pip install bazel-bin/python/cohort-*.whl) or set COHORT_LAUNCH to "
                         "bazel-bin/tools/launch/launch")
    return path


def _with_slots(hosts, slots):
    """'a,b:3' with every host given `slots` slots (a hosts file is left as it is)."""
    if os.path.exists(hosts):
        raise UsageError("--nproc-per-node with a hosts file: give the slots in the file "
                         "('host slots=N') instead")
    return ",".join(f"{re.sub(r':[0-9]+$', '', h)}:{slots}" for h in hosts.split(","))


def launch_command(argv, launcher):
    """The launcher's command line for cohortrun's arguments."""
    workers = hosts = per_node = shards = min_workers = max_workers = None
    passed = []
    i = 0

    def value(name):
        nonlocal i
        if i + 1 >= len(argv):
            raise UsageError(f"{name} needs a value")
        i += 1
        return argv[i]

    while i < len(argv) and argv[i].startswith("-"):
        word = argv[i]
        name, eq, inline = word.partition("=")
        get = (lambda n: inline) if eq else value
        if name in ("-np", "-n", "--np", "--num-proc"):
            workers = get(name)
        elif name in ("-H", "--hosts"):
            hosts = get(name)
        elif name == "--hostfile":
            hosts = get(name)
            if not os.path.exists(hosts):
                raise UsageError(f"--hostfile {hosts}: no such file")
        elif name in ("--nproc-per-node", "--nproc_per_node"):
            per_node = get(name)
        elif name in ("-s", "--num-shards", "--num_shards"):
            shards = get(name)
        elif name in ("--min-np", "--min_np"):
            min_workers = get(name)
        elif name in ("--max-np", "--max_np"):
            max_workers = get(name)
        elif word.startswith("--") and eq:
            passed.append(word)  # a launcher option
        else:
            raise UsageError(f"unknown option {word} (launcher options go as --name=value)")
        i += 1
    program = argv[i:]
    if not program:
        raise UsageError("no program to run: cohortrun [options] python train.py")
    if program[0] in ("python", "python3"):
        # The interpreter cohortrun runs in (a venv's, with the package), as torchrun does.
        program = [sys.executable, *program[1:]]
    for name, v in (("-np", workers), ("--nproc-per-node", per_node), ("-s", shards),
                    ("--min-np", min_workers), ("--max-np", max_workers)):
        if v is not None and (not v.isdigit() or int(v) < 1):
            raise UsageError(f"{name} {v}: a number of processes, at least 1")
    if per_node is not None:
        if hosts is not None:
            hosts = _with_slots(hosts, per_node)
            count = len(hosts.split(","))
        else:
            count = 1
        if workers is None:
            workers = str(int(per_node) * count)
    if workers is None:
        raise UsageError("how many workers? -np N (or --nproc-per-node K)")
    command = [launcher, "-n", workers]
    if shards is not None:
        command += ["-s", shards]
    if hosts is not None:
        command += ["-H", hosts]
    if min_workers is not None or max_workers is not None:
        command += ["--on_worker_failure=elastic", f"--min_workers={min_workers or 1}"]
        if max_workers is not None:
            command.append(f"--max_workers={max_workers}")
    bins = os.path.dirname(launcher)
    for role in ("scheduler", "shard"):
        binary = os.path.join(bins, role)
        if os.access(binary, os.X_OK):
            command.append(f"--{role}_binary={binary}")
    return command + passed + ["--", *program]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    try:
        command = launch_command(argv, _launcher())
    except UsageError as e:
        print(f"cohortrun: {e}\n{USAGE}", file=sys.stderr)
        return 2
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
