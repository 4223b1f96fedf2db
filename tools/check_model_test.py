#!/usr/bin/python3
"""Tests for check_model.py: the command, end to end."""

import contextlib
import io
import os
import re
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_model  # noqa: E402
from numpy_model import datasets, models, safetensors_file  # noqa: E402
from numpy_model.testing import (  # noqa: E402
    encode_tensor, build_safetensors, write_raw_safetensors, write_safetensors, write_idx,
    lenet_tensors, mlp_tensors, resnet_tensors, resnet_metadata, write_cifar10, LENET_METADATA,
    MLP_METADATA, TempDirTestCase)


RESULT_LINE = re.compile(r"^top1=\d+\.\d\d top5=\d+\.\d\d n=\d+$")


class MainTest(TempDirTestCase):
    N = 20

    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(7)
        self.rng = rng
        self.images = rng.integers(0, 256, (self.N, 28, 28), dtype=np.uint8)
        self.labels = rng.integers(0, 10, self.N, dtype=np.uint8)
        # Make sure class 3 is present but not everywhere.
        self.labels[:4] = 3
        self.labels[4] = 0
        write_idx(self.path(datasets.TEST_IMAGES + ".gz"), datasets.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  self.labels)
        self.model_path = self.path("model.safetensors")

    def run_main(self, *args):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            code = check_model.main([self.model_path, "--data_dir", self.dir, *args])
        return code, stdout.getvalue(), stderr.getvalue()

    def parse_result(self, stdout):
        last = stdout.splitlines()[-1]
        self.assertRegex(last, RESULT_LINE)
        fields = dict(item.split("=") for item in last.split())
        return float(fields["top1"]), float(fields["top5"]), int(fields["n"])

    def test_random_lenet_prints_result_line(self):
        write_safetensors(self.model_path, lenet_tensors(self.rng),
                          LENET_METADATA)
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(len(stdout.splitlines()), 1)
        top1, top5, n = self.parse_result(stdout)
        self.assertEqual(n, self.N)
        self.assertLessEqual(top1, top5)

    def test_random_lenet_matches_direct_forward(self):
        tensors = lenet_tensors(self.rng)
        write_safetensors(self.model_path, tensors, LENET_METADATA)
        x = (self.images / 255.0 - 0.2860) / 0.3530
        logits = models.forward_lenet(dict(tensors), x.reshape(self.N, 1, 28, 28))
        top1, top5 = models.accuracy(logits, self.labels.astype(np.int64))
        # Small batches exercise the batching loop.
        code, stdout, stderr = self.run_main("--batch", "3")
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(),
                         f"top1={100 * top1 / self.N:.2f} "
                         f"top5={100 * top5 / self.N:.2f} n={self.N}")

    def constant_lenet(self):
        """A lenet whose logits are exactly fc3.bias for every input."""
        tensors = [(name, np.zeros_like(a))
                   for name, a in lenet_tensors(self.rng)]
        fc3_bias = np.zeros(10, np.float32)
        # Class 3 wins; classes 5, 7, 1, 9 follow, then the rest tie at 0.
        fc3_bias[[3, 5, 7, 1, 9]] = [5.0, 4.0, 3.0, 2.0, 1.0]
        return [(n, fc3_bias if n == "fc3.bias" else a) for n, a in tensors]

    def test_constant_lenet_accuracy(self):
        write_safetensors(self.model_path, self.constant_lenet(),
                          LENET_METADATA)
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        top1 = np.count_nonzero(self.labels == 3)
        top5 = np.count_nonzero(np.isin(self.labels, [3, 5, 7, 1, 9]))
        self.assertEqual(stdout.strip(),
                         f"top1={100 * top1 / self.N:.2f} "
                         f"top5={100 * top5 / self.N:.2f} n={self.N}")

    def test_input_normalisation(self):
        # logits: class 1 = relu(x0), class 2 = 1, others 0, where x0 is the
        # normalised first pixel. Class 1 wins exactly when
        # (pixel / 255 - mean) / std > 1, i.e. pixel > 255 * (mean + std).
        mean, std = 0.25, 0.5
        fc1_w = np.zeros((2, 784), np.float32)
        fc1_w[0, 0] = 1.0
        fc3_w = np.zeros((10, 2), np.float32)
        fc3_w[1, 0] = 1.0
        fc3_b = np.zeros(10, np.float32)
        fc3_b[2] = 1.0
        tensors = [("fc1.weight", fc1_w), ("fc1.bias", np.zeros(2)),
                   ("fc2.weight", np.eye(2)), ("fc2.bias", np.zeros(2)),
                   ("fc3.weight", fc3_w), ("fc3.bias", fc3_b)]
        metadata = {**MLP_METADATA, "input_mean": str(mean),
                    "input_std": str(std)}
        write_safetensors(self.model_path, tensors, metadata)
        first_pixels = np.linspace(0, 255, self.N).round().astype(np.uint8)
        self.images[:, 0, 0] = first_pixels
        labels = np.where(first_pixels > 255 * (mean + std), 1, 2)
        self.assertTrue(0 < np.count_nonzero(labels == 1) < self.N)
        write_idx(self.path(datasets.TEST_IMAGES + ".gz"), datasets.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  labels)
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), f"top1=100.00 top5=100.00 n={self.N}")

    def test_limit(self):
        write_safetensors(self.model_path, self.constant_lenet(),
                          LENET_METADATA, dtype="BF16")
        code, stdout, stderr = self.run_main("--limit", "5")
        self.assertEqual(code, 0, stderr)
        # The first five labels are 3, 3, 3, 3, 0.
        self.assertEqual(stdout.strip(), "top1=80.00 top5=80.00 n=5")

    def test_mlp(self):
        tensors = mlp_tensors(self.rng)
        write_safetensors(self.model_path, tensors, MLP_METADATA)
        x = (self.images / 255.0 - 0.2860) / 0.3530
        logits = models.forward_mlp(dict(tensors), x)
        top1, top5 = models.accuracy(logits, self.labels.astype(np.int64))
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(),
                         f"top1={100 * top1 / self.N:.2f} "
                         f"top5={100 * top5 / self.N:.2f} n={self.N}")

    def test_bad_model_file_exits_2(self):
        header, data = build_safetensors(lenet_tensors(self.rng),
                                         LENET_METADATA)
        write_raw_safetensors(self.model_path, header, data + b"\0")
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 2)
        self.assertEqual(stdout, "")
        self.assertIn(self.model_path, stderr)
        self.assertIn("trailing bytes", stderr)

    def test_wrong_tensor_shape_exits_2(self):
        tensors = [(n, np.zeros((84, 100), np.float32) if n == "fc2.weight"
                    else a) for n, a in lenet_tensors(self.rng)]
        write_safetensors(self.model_path, tensors, LENET_METADATA)
        code, _, stderr = self.run_main()
        self.assertEqual(code, 2)
        self.assertIn("fc2.weight", stderr)
        self.assertIn("[84, 100]", stderr)

    def test_input_shape_mismatch_exits_2(self):
        metadata = {**MLP_METADATA, "input_shape": "[1,14,56]"}
        write_safetensors(self.model_path, mlp_tensors(self.rng), metadata)
        code, _, stderr = self.run_main()
        self.assertEqual(code, 2)
        self.assertIn("input_shape", stderr)

    def test_bad_data_exits_2(self):
        write_safetensors(self.model_path, lenet_tensors(self.rng),
                          LENET_METADATA)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  self.labels[:-1])
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 2)
        self.assertEqual(stdout, "")
        self.assertIn(datasets.TEST_LABELS, stderr)

    def direct_result(self, tensors, model, images, mean=0.2860, std=0.3530):
        """The result line from models.forward_resnet on already padded images."""
        x = (images / 255.0 - mean) / std
        logits = models.forward_resnet(dict(tensors), x, model)
        top1, top5 = models.accuracy(logits, self.labels.astype(np.int64))
        return (f"top1={100 * top1 / self.N:.2f} "
                f"top5={100 * top5 / self.N:.2f} n={self.N}")

    def test_resnet20_pads_fashion_mnist(self):
        tensors = resnet_tensors(self.rng, "resnet20", 1)
        write_safetensors(self.model_path, tensors, resnet_metadata())
        # 28x28 -> 32x32 with two zero pixels on every side.
        padded = np.pad(self.images[:, None], ((0, 0), (0, 0), (2, 2), (2, 2)))
        want = self.direct_result(tensors, "resnet20", padded)
        top1, top5, n = check_model.evaluate(self.model_path, self.dir, batch=7)
        self.assertEqual(f"top1={top1:.2f} top5={top5:.2f} n={n}", want)
        code, stdout, stderr = self.run_main("--batch", "7")
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), want)

    def test_resnet_bf16_file(self):
        tensors = resnet_tensors(self.rng, "resnet20", 1)
        # Values that bfloat16 holds exactly, so both paths see the same.
        tensors = [(n, safetensors_file.decode_tensor(encode_tensor(a, "BF16"), "BF16",
                                        a.shape)) for n, a in tensors]
        write_safetensors(self.model_path, tensors, resnet_metadata(),
                          dtype="BF16")
        padded = np.pad(self.images[:, None], ((0, 0), (0, 0), (2, 2), (2, 2)))
        want = self.direct_result(tensors, "resnet20", padded)
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), want)

    def test_padding_is_a_black_pixel(self):
        # An mlp on 32x32 input whose class 1 logit is relu(-x) of the
        # top-left input pixel, which is padding, and class 2 logit is
        # 0.1. With mean 0.25 and std 0.5 a black pixel normalises to -0.5,
        # so class 1 wins only if padding comes before normalisation.
        fc1_w = np.zeros((1, 32 * 32), np.float32)
        fc1_w[0, 0] = -1.0
        fc3_w = np.zeros((10, 1), np.float32)
        fc3_w[1, 0] = 1.0
        fc3_b = np.zeros(10, np.float32)
        fc3_b[2] = 0.1
        tensors = [("fc1.weight", fc1_w), ("fc1.bias", np.zeros(1)),
                   ("fc2.weight", np.eye(1)), ("fc2.bias", np.zeros(1)),
                   ("fc3.weight", fc3_w), ("fc3.bias", fc3_b)]
        metadata = {**MLP_METADATA, "input_shape": "[1,32,32]",
                    "input_mean": "0.25", "input_std": "0.5"}
        write_safetensors(self.model_path, tensors, metadata)
        write_idx(self.path(datasets.TEST_LABELS + ".gz"), datasets.IDX_LABELS_MAGIC,
                  np.ones(self.N))
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), f"top1=100.00 top5=100.00 n={self.N}")

    def test_resnet_on_cifar10(self):
        images = self.rng.integers(0, 256, (self.N, 3, 32, 32),
                                   dtype=np.uint8)
        write_cifar10(self.path(datasets.CIFAR10_TEST_BATCH), images, self.labels)
        tensors = resnet_tensors(self.rng, "resnet20", 3)
        metadata = {**resnet_metadata(input_shape="[3,32,32]"),
                    "input_mean": "0.4734", "input_std": "0.2516"}
        write_safetensors(self.model_path, tensors, metadata)
        want = self.direct_result(tensors, "resnet20", images, 0.4734, 0.2516)
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), want)

    def assert_resnet_rejected(self, tensors, metadata, *expected):
        write_safetensors(self.model_path, tensors, metadata)
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 2)
        self.assertEqual(stdout, "")
        self.assertIn(self.model_path, stderr)
        for text in expected:
            self.assertIn(text, stderr)

    def test_resnet_missing_running_var_exits_2(self):
        tensors = [(n, a) for n, a in resnet_tensors(self.rng, "resnet20", 1)
                   if n != "layer2.1.bn2.running_var"]
        self.assert_resnet_rejected(tensors, resnet_metadata(),
                                    "missing ['layer2.1.bn2.running_var']")

    def test_resnet_wrong_shape_exits_2(self):
        tensors = [(n, np.zeros((64, 64, 3, 3), np.float32)
                    if n == "layer3.0.conv1.weight" else a)
                   for n, a in resnet_tensors(self.rng, "resnet20", 1)]
        self.assert_resnet_rejected(
            tensors, resnet_metadata(), "layer3.0.conv1.weight",
            "[64, 64, 3, 3], expected [64, 32, 3, 3]")

    def test_resnet_negative_running_var_exits_2(self):
        tensors = resnet_tensors(self.rng, "resnet20", 1)
        # In place, so the list of tensors written below holds it.
        dict(tensors)["layer1.1.bn2.running_var"][3] = -0.25
        self.assert_resnet_rejected(tensors, resnet_metadata(),
                                    "layer1.1.bn2.running_var", "-0.25",
                                    "must be >= 0")

    def test_unknown_model_exits_2(self):
        self.assert_resnet_rejected(resnet_tensors(self.rng, "resnet20", 1),
                                    resnet_metadata("resnet18"),
                                    "__metadata__['model']", "'resnet18'")

    def test_resnet_input_mismatch_exits_2(self):
        tensors = resnet_tensors(self.rng, "resnet20", 3)
        self.assert_resnet_rejected(
            tensors, resnet_metadata(input_shape="[3,32,32]"),
            "input_shape [3, 32, 32] has 3 channels but the test images "
            "have 1")
        tensors = resnet_tensors(self.rng, "resnet20", 1)
        self.assert_resnet_rejected(
            tensors, resnet_metadata(input_shape="[1,31,31]"),
            "cannot be padded equally")
        self.assert_resnet_rejected(
            tensors, resnet_metadata(input_shape="[1,24,24]"),
            "smaller than the 28x28 test images")

    def test_script_runs_as_program(self):
        write_safetensors(self.model_path, self.constant_lenet(),
                          LENET_METADATA)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "check_model.py")
        result = subprocess.run(
            [sys.executable, script, self.model_path, "--data_dir", self.dir,
             "--limit", "5"], capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "top1=80.00 top5=80.00 n=5\n")
        result = subprocess.run(
            [sys.executable, script, self.path("missing.safetensors"),
             "--data_dir", self.dir], capture_output=True, text=True,
            check=False)
        self.assertEqual(result.returncode, 2)


if __name__ == "__main__":
    unittest.main()
