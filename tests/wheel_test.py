#!/usr/bin/python3
"""The wheel (//python:wheel) as a user installs it: pip install --no-index into a fresh venv
(with Debian's numpy and torch beside it) and into a folder of Debian's Python (--target), then
`cohortrun -np 2 python numpy_kvstore.py` and `python -m cohort.run --nproc-per-node 2 ...` from
a folder of the user's own: both jobs end DONE, the two ranks holding the same weights. The
same wheel in every other CPython 3 of the machine (pyenv's, /usr/local's; none on a bare
Debian): its kvstore works there without a rebuild.
Usage: wheel_test.py WHEEL NUMPY_EXAMPLE JOB_PROCESSES_PY
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

WHEEL, NUMPY_EXAMPLE, JOB_PROCESSES = (os.path.abspath(p) for p in sys.argv[1:4])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
from job_processes import wait_job_gone  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's


def other_pythons():
    """The machine's other CPythons from 3.8 on, but Debian's."""
    found = set()
    for path in glob.glob("/usr/local/bin/python3.*") + glob.glob("/usr/bin/python3.*") + \
            glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")):
        version = subprocess.run([path, "-c", "import sys; print(sys.version_info[1])"],
                                 capture_output=True, text=True)
        if version.returncode == 0 and int(version.stdout) >= 8 and \
                os.path.realpath(path) != os.path.realpath(PYTHON):
            found.add(os.path.realpath(path))
    return sorted(found)


OTHER_PYTHONS = other_pythons()


class WheelTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.user = os.path.join(self.dir, "my-project")  # where the user's script lives
        os.mkdir(self.user)
        shutil.copy(NUMPY_EXAMPLE, self.user)

    def run_job(self, command, job, **extra):
        """Runs command in the user's folder, with nothing of the build in its environment."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COHORT_LAUNCH")}
        env.update(extra, COHORT_JOB_ID=job, TMPDIR=self.dir)
        done = subprocess.run(command, cwd=self.user, env=env, capture_output=True, text=True,
                              timeout=180)
        out = done.stdout + done.stderr
        self.assertEqual(done.returncode, 0, out)
        self.assertIn("job DONE: all 2 workers finished", out)
        weights = re.findall(r"\] rank \d of 2: last batch loss .* w\[1\] (\S+)", out)
        self.assertEqual(len(weights), 2, out)
        self.assertEqual(weights[0], weights[1], out)
        self.assertEqual(wait_job_gone(job, 5), [])

    def test_cohortrun_from_a_venv(self):
        venv = os.path.join(self.dir, "venv")
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv], check=True)
        subprocess.run([f"{venv}/bin/pip", "install", "--no-index", "-q", WHEEL], check=True)
        self.run_job(["cohortrun", "-np", "2", "python", "numpy_kvstore.py"],
                     f"wheel-venv-{os.getpid()}", PATH=f"{venv}/bin:{os.environ['PATH']}")

    def test_python_m_cohort_run_from_a_target_folder(self):
        target = os.path.join(self.dir, "site")
        subprocess.run([PYTHON, "-m", "pip", "install", "--no-index", "-q", "--target", target,
                        WHEEL], check=True)
        self.run_job([PYTHON, "-m", "cohort.run", "--nproc-per-node", "2", "-s", "1", PYTHON,
                      "numpy_kvstore.py"], f"wheel-target-{os.getpid()}", PYTHONPATH=target)

    @unittest.skipIf(not OTHER_PYTHONS, "no CPython here but Debian's")
    def test_every_cpython_3_loads_the_same_wheel(self):
        script = ("import array, sys; import cohort\n"
                  "kv = cohort.kvstore.create('local')\n"
                  "kv.set_optimizer('sgd', lr=0.5)\n"
                  "kv.init(3, array.array('f', [1, 2, 3]))\n"
                  "out = array.array('f', [0, 0, 0])\n"
                  "kv.pushpull(3, array.array('f', [1, 1, 1]), out).wait()\n"
                  "print(sys.version_info[:2], list(out))\n")
        for python in OTHER_PYTHONS:
            with self.subTest(python=python):
                target = os.path.join(self.dir, os.path.basename(python) + "-site")
                subprocess.run([python, "-m", "pip", "install", "--no-index", "-q",
                                "--target", target, WHEEL], check=True)
                done = subprocess.run([python, "-c", script], cwd=self.user, capture_output=True,
                                      text=True, env=dict(os.environ, PYTHONPATH=target),
                                      timeout=60)
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                self.assertIn("[0.5, 1.5, 2.5]", done.stdout)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
