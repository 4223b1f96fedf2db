"""The scheduler's job page in a real browser (Debian's Chromium, headless): a TLS job with a
token is watched live through its HTTPS port, and the page the scheduler wrote at the end is
opened as a file. The page must load, show the job and its members, and plot points.

Usage: job_page_test.py LAUNCH MAKE_JOB_CERTS JOB_PROCESSES_PY
"""

import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import unittest

LAUNCH, MAKE_JOB_CERTS, JOB_PROCESSES = (os.path.abspath(p) for p in sys.argv[1:4])
sys.path.insert(0, os.path.dirname(JOB_PROCESSES))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job_fixture import JobTestCase  # noqa: E402

TOKEN = "job-page-test-token"


class JobPageTest(JobTestCase):
    job_prefix = "pagetest"

    def setUp(self):
        super().setUp()
        self.chromium = shutil.which("chromium")
        self.assertIsNotNone(self.chromium, "no chromium: run tools/install_deps.sh")
        self.shots = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", self.dir)

    def browse(self, url, name):
        """The page's DOM after its scripts ran (6 s of the page's own time), and a screenshot
        of it saved as NAME.png; checks the screenshot is a picture."""
        common = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                  f"--user-data-dir={os.path.join(self.dir, 'chromium-' + name)}",
                  "--ignore-certificate-errors",  # the job's own CA, for the name "cohort"
                  "--virtual-time-budget=6000", "--window-size=1280,1000"]
        dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
        shot = os.path.join(self.shots, f"{name}.png")
        r = subprocess.run(common + [f"--screenshot={shot}", url], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", shot)
        self.assertGreater(os.path.getsize(shot), 10_000, shot)
        return dom.stdout

    def points(self, dom, chart):
        found = re.search(rf'id="chart-{chart}"[^>]*data-points="(\d+)"', dom)
        self.assertIsNotNone(found, f"no plot {chart} in\n{dom[:3000]}")
        return int(found.group(1))

    def test_a_tls_job_is_watched_live_and_its_page_read_after(self):
        tls = os.path.join(self.dir, "tls")
        token = self.make_job_tls(MAKE_JOB_CERTS, tls, TOKEN)
        model = os.path.join(self.dir, "out", "model.safetensors")
        os.makedirs(os.path.dirname(model))
        launch = self.start("launch", [
            LAUNCH, f"--job_id={self.job_id}", "-n", "2", "-s", "1", f"--tls_dir={tls}",
            f"--token_file={token}", "--", "--model=lenet", "--epochs=3", "--batch_size=256",
            "--log_interval=40", f"--output={model}"])
        # The scheduler says where its page is.
        deadline = time.monotonic() + 60
        found = None
        while found is None and time.monotonic() < deadline and launch.poll() is None:
            found = re.search(r"job page on https://([\d.]+):(\d+)/", self.log("launch"))
            time.sleep(0.2)
        self.assertIsNotNone(found, self.log("launch"))
        host, port = found.group(1), int(found.group(2))

        # Once the job has a few samples, the browser opens the page with the token...
        context = ssl.create_default_context(cafile=os.path.join(tls, "ca.pem"))
        context.check_hostname = False  # issued for "cohort"

        def history():
            connection = http.client.HTTPSConnection(host, port, context=context, timeout=10)
            try:
                connection.request("GET", "/history", headers={"Authorization": f"Bearer {TOKEN}"})
                return json.loads(connection.getresponse().read())
            finally:
                connection.close()

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and launch.poll() is None:
            if sum(s["images_per_second"] > 0 for s in history()["samples"]) >= 2:
                break
            time.sleep(0.5)
        self.assertIsNone(launch.poll(), f"the job ended too soon:\n{self.log('launch')}")
        live = self.browse(f"https://{host}:{port}/#token={TOKEN}", "live")
        self.assertRegex(live, rf'<span id="job">{self.job_id}</span>')
        self.assertRegex(live, r'id="state" class="state (RUNNING|DONE)"')
        self.assertGreaterEqual(self.points(live, "speed"), 1)
        self.assertGreaterEqual(self.points(live, "loss"), 1)
        self.assertEqual(len(re.findall(r"<td class=\"l\">worker</td>", live)), 2, live[:3000])
        self.assertIn("job RUNNING", live)
        self.assertRegex(live, r"step \d+ of 351")  # 60000 / 512 = 117 steps an epoch, 3 epochs
        # ... and without it, the page asks for the token and shows no data.
        locked = self.browse(f"https://{host}:{port}/", "locked")
        self.assertRegex(locked, r'<form id="token" style="display: block;')
        self.assertNotIn("data-points=", locked)
        self.assertNotIn(self.job_id, locked)

        self.assertEqual(launch.wait(timeout=600), 0, self.log("launch"))
        # The page the scheduler wrote at the end, beside the model, opens without it.
        report = os.path.join(self.dir, "out", f"{self.job_id}.html")
        self.assertTrue(os.path.exists(report), self.log("launch"))
        ended = self.browse(f"file://{report}", "ended")
        self.assertRegex(ended, r'id="state" class="state DONE"')
        self.assertIn("written by the scheduler when the job ended", ended)
        self.assertGreaterEqual(self.points(ended, "speed"), 2)
        self.assertGreaterEqual(self.points(ended, "accuracy"), 1)  # evaluated after each epoch
        self.assertRegex(ended, r"test top-1 \d+\.\d\d%")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
