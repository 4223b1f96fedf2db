#!/usr/bin/python3
"""End-to-end tests of the train binary: bad input gives one clear error and a non-zero exit;
a one-epoch LeNet run learns Fashion-MNIST and the independent numpy checker agrees with it.

Usage: train_cli_test.py TRAIN_BINARY CHECK_MODEL_PY
"""

import gzip
import os
import re
import subprocess
import sys
import tempfile
import unittest

TRAIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else None
CHECK = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
FASHION = "/usr/share/datasets/fashion-mnist"


def run(*args, **kwargs):
    return subprocess.run([TRAIN, *args], capture_output=True, text=True, timeout=600, **kwargs)


class BadInput(unittest.TestCase):
    def assert_fails(self, args, *fragments):
        r = run(*args)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        for f in fragments:
            self.assertIn(f, r.stderr)
        self.assertNotIn("Segmentation", r.stderr)
        self.assertNotIn("terminate called", r.stderr)
        return r

    def test_unknown_flag(self):
        self.assert_fails(["--learning_rate=0.1"], "learning_rate")

    def test_unknown_model(self):
        self.assert_fails(["--model=resnet9000", "--epochs=1"],
                          "unknown model 'resnet9000'; known models: lenet, mlp, resnet20")

    def test_unknown_dataset(self):
        self.assert_fails(["--dataset=cifar-100"], "unknown dataset 'cifar-100'")

    def test_bad_values_name_the_flag(self):
        self.assert_fails(["--batch_size=0"], "--batch_size=0: must be > 0")
        self.assert_fails(["--momentum=1.5"], "--momentum=1.5: must be in [0, 1)")
        self.assert_fails(["--devices=tpu"], "--devices=tpu")
        self.assert_fails(["--optimizer=lamb"], "--optimizer=lamb: expected sgd or adam")
        self.assert_fails(["--lr_schedule=linear"], "--lr_schedule=linear: expected constant")
        self.assert_fails(["--warmup_epochs=3", "--epochs=2"], "--warmup_epochs=3")
        self.assert_fails(["--kv_store=dist"], "--kv_store=dist: expected local, dist_sync")
        self.assert_fails(["--kv-store=dist_sync"], "--kv_store=dist_sync: the distributed")
        self.assert_fails(["--augment=mixup"], "--augment=mixup: expected none, flip or crop_flip")
        self.assert_fails(["--dataset=synthetic:3x0x4:10"], "--dataset=synthetic:3x0x4:10")

    def test_missing_data_dir(self):
        self.assert_fails(["--data_dir=/nonexistent/fm"], "/nonexistent/fm does not exist")

    def test_truncated_and_corrupt_files(self):
        with tempfile.TemporaryDirectory() as d:
            names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
            labels = bytes([0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3])
            images = bytes([0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2]) + bytes(12)
            for n in names:
                with gzip.open(os.path.join(d, n), "wb") as f:
                    f.write(images if "images" in n else labels)
            # Data shorter than the header says.
            with gzip.open(os.path.join(d, names[0]), "wb") as f:
                f.write(images[:-3])
            self.assert_fails([f"--data_dir={d}"], os.path.join(d, names[0]), "truncated")
            # A gzip stream cut in half.
            with gzip.open(os.path.join(d, names[0]), "wb") as f:
                f.write(images + os.urandom(5000))
            raw = open(os.path.join(d, names[0]), "rb").read()
            open(os.path.join(d, names[0]), "wb").write(raw[: len(raw) // 2])
            self.assert_fails([f"--data_dir={d}"], names[0], "corrupt or truncated gzip")
            # Wrong magic: a labels file where images belong.
            with gzip.open(os.path.join(d, names[0]), "wb") as f:
                f.write(labels)
            self.assert_fails([f"--data_dir={d}"], "magic number 0x00000801")
            # Count mismatch between images and labels.
            with gzip.open(os.path.join(d, names[0]), "wb") as f:
                f.write(images)
            with gzip.open(os.path.join(d, names[1]), "wb") as f:
                f.write(bytes([0, 0, 8, 1, 0, 0, 0, 2, 1, 2]))
            self.assert_fails([f"--data_dir={d}"], "holds 3 images but", "holds 2 labels")


@unittest.skipUnless(os.path.isdir(FASHION), "Fashion-MNIST not installed")
class OneEpoch(unittest.TestCase):
    def test_lenet_learns_and_checker_agrees(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--model=lenet", "--dataset=fashion-mnist", "--epochs=1",
                    "--log-interval=300", "--output=lenet.safetensors", cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"Step\s+Epoch\s+Speed\(img/s\)\s+Loss\s+LR")
            m = re.search(r"Test top-1 ([\d.]+)% top-5 ([\d.]+)%", r.stdout)
            self.assertIsNotNone(m, r.stdout)
            top1, top5 = float(m.group(1)), float(m.group(2))
            self.assertGreaterEqual(top1, 80.0, r.stdout)
            self.assertGreaterEqual(top5, 98.0, r.stdout)
            path = os.path.join(d, "lenet.safetensors")  # relative to the working directory
            c = subprocess.run(["/usr/bin/python3", CHECK, path], capture_output=True, text=True,
                               timeout=600)
            self.assertEqual(c.returncode, 0, c.stderr)
            cm = re.match(r"top1=([\d.]+) top5=([\d.]+) n=10000", c.stdout.strip())
            self.assertIsNotNone(cm, c.stdout)
            self.assertLessEqual(abs(float(cm.group(1)) - top1), 0.1, (c.stdout, r.stdout))
            self.assertLessEqual(abs(float(cm.group(2)) - top5), 0.1, (c.stdout, r.stdout))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
