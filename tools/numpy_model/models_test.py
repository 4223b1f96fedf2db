#!/usr/bin/python3
"""Tests for models.py: the models' tensors, their metadata, accuracy."""

import os
import re
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_model import errors, models  # noqa: E402
from numpy_model.testing import (  # noqa: E402
    lenet_tensors, mlp_tensors, RESNET_DEPTHS, RESNET_PARAMETERS, RUNNING_STATS, resnet_tensors,
    resnet_metadata, LENET_METADATA)


class CheckResnetTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(14)
        self.tensors = dict(resnet_tensors(self.rng, "resnet20"))

    def check(self, tensors, model="resnet20", input_shape=(3, 32, 32)):
        return models.check_model(tensors, model, input_shape)

    def test_parameter_counts(self):
        for model, expected in RESNET_PARAMETERS.items():
            with self.subTest(model=model):
                tensors = resnet_tensors(self.rng, model)
                trainable = sum(a.size for n, a in tensors
                                if not n.endswith(RUNNING_STATS))
                self.assertEqual(trainable, expected)
                self.assertEqual(self.check(dict(tensors), model), 10)
                shapes = models.resnet_tensor_shapes(model, 3, 10)
                self.assertEqual([n for n, _ in shapes],
                                 [n for n, _ in tensors])
                self.assertEqual(sum(int(np.prod(s)) for n, s in shapes
                                     if not n.endswith(RUNNING_STATS)),
                                 expected)

    def test_file_order(self):
        names = list(self.tensors)
        self.assertEqual(names[:6], ["conv1.weight", "bn1.weight", "bn1.bias",
                                     "bn1.running_mean", "bn1.running_var",
                                     "layer1.0.conv1.weight"])
        self.assertEqual(names[6:16], [
            "layer1.0.bn1.weight", "layer1.0.bn1.bias",
            "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
            "layer1.0.conv2.weight", "layer1.0.bn2.weight",
            "layer1.0.bn2.bias", "layer1.0.bn2.running_mean",
            "layer1.0.bn2.running_var", "layer1.1.conv1.weight"])
        self.assertEqual(names[-2:], ["fc.weight", "fc.bias"])

    def test_classes_and_input_channels(self):
        tensors = dict(resnet_tensors(self.rng, "resnet32", 1, classes=7))
        self.assertEqual(self.check(tensors, "resnet32", (1, 32, 32)), 7)
        with self.assertRaisesRegex(errors.ModelFileError,
                                    r"conv1.weight .*\[16, 3, 3, 3\]"):
            self.check(tensors, "resnet32", (3, 32, 32))

    def test_missing_and_unexpected(self):
        del self.tensors["layer2.1.bn2.running_var"]
        self.tensors["layer2.0.shortcut.weight"] = np.zeros(1, np.float32)
        with self.assertRaisesRegex(
                errors.ModelFileError,
                r"missing \['layer2.1.bn2.running_var'\], "
                r"unexpected \['layer2.0.shortcut.weight'\]"):
            self.check(self.tensors)

    def test_depth_must_match(self):
        tensors = dict(resnet_tensors(self.rng, "resnet32"))
        with self.assertRaisesRegex(errors.ModelFileError,
                                    r"unexpected \['layer1.3.conv1.weight'"):
            self.check(tensors, "resnet20")
        with self.assertRaisesRegex(errors.ModelFileError,
                                    r"missing \['layer1.3.conv1.weight'"):
            self.check(self.tensors, "resnet32")

    def test_out_of_order(self):
        items = list(self.tensors.items())
        items[1], items[2] = items[2], items[1]
        with self.assertRaisesRegex(errors.ModelFileError,
                                    "out of order: position 1 holds bn1.bias, "
                                    "expected bn1.weight"):
            self.check(dict(items))

    def test_wrong_shapes(self):
        cases = [
            ("conv1.weight", (16, 3, 5, 5), r"\[16, 3, 3, 3\]"),
            ("bn1.running_mean", (15,), r"\[16\]"),
            ("layer1.2.conv2.weight", (16, 16, 3), r"\[16, 16, 3, 3\]"),
            ("layer2.0.conv1.weight", (32, 32, 3, 3), r"\[32, 16, 3, 3\]"),
            ("layer3.0.bn1.bias", (32,), r"\[64\]"),
            ("layer3.2.conv2.weight", (64, 32, 3, 3), r"\[64, 64, 3, 3\]"),
            ("fc.weight", (10, 32), r"\[classes>0, 64\]"),
            ("fc.weight", (0, 64), r"\[classes>0, 64\]"),
            ("fc.bias", (9,), r"\[10\]"),
        ]
        for name, shape, expected in cases:
            with self.subTest(name=name, shape=shape):
                tensors = dict(self.tensors)
                tensors[name] = np.zeros(shape, np.float32)
                with self.assertRaisesRegex(
                        errors.ModelFileError,
                        f"tensor {re.escape(name)} has shape "
                        f"{re.escape(str(list(shape)))}, expected {expected}"):
                    self.check(tensors)

    def test_bad_running_var(self):
        for value in (-0.5, np.nan):
            with self.subTest(value=value):
                tensors = dict(self.tensors)
                var = tensors["layer1.2.bn1.running_var"].copy()
                var[5] = value
                tensors["layer1.2.bn1.running_var"] = var
                with self.assertRaisesRegex(
                        errors.ModelFileError,
                        r"tensor layer1.2.bn1.running_var holds .* at index "
                        r"5, but a running variance must be >= 0"):
                    self.check(tensors)
        # Zero is a valid variance: eps keeps the division finite.
        self.tensors["bn1.running_var"] = np.zeros(16, np.float32)
        self.assertEqual(self.check(self.tensors), 10)

    def test_input_shape_must_be_chw(self):
        with self.assertRaisesRegex(errors.ModelFileError,
                                    r"resnet20 needs a \[C, H, W\]"):
            self.check(self.tensors, input_shape=(3072,))

    def test_metadata_models(self):
        for model in RESNET_DEPTHS:
            with self.subTest(model=model):
                parsed = models.parse_metadata(resnet_metadata(model, "[3,32,32]"))
                self.assertEqual(parsed[:2], (model, (3, 32, 32)))
        with self.assertRaisesRegex(errors.ModelFileError,
                                    "'model'.*'resnet18'.*'resnet110'"):
            models.parse_metadata(resnet_metadata("resnet18"))


class CheckModelTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(5)
        self.lenet = dict(lenet_tensors(rng))
        self.mlp = dict(mlp_tensors(rng))

    def test_valid_models(self):
        self.assertEqual(models.check_model(self.lenet, "lenet", (1, 28, 28)), 10)
        self.assertEqual(models.check_model(self.mlp, "mlp", (1, 28, 28)), 10)
        self.assertEqual(models.check_model(self.mlp, "mlp", (784,)), 10)

    def test_missing_tensor(self):
        del self.lenet["conv2.bias"]
        with self.assertRaisesRegex(errors.ModelFileError,
                                    r"missing \['conv2.bias'\]"):
            models.check_model(self.lenet, "lenet", (1, 28, 28))

    def test_unexpected_tensor(self):
        self.mlp["conv1.weight"] = np.zeros((6, 1, 5, 5), np.float32)
        with self.assertRaisesRegex(errors.ModelFileError,
                                    r"unexpected \['conv1.weight'\]"):
            models.check_model(self.mlp, "mlp", (1, 28, 28))

    def test_inconsistent_shapes(self):
        cases = [
            ("lenet", "conv1.weight", (6, 3, 5, 5), "conv1.weight"),
            ("lenet", "conv1.bias", (5,), "conv1.bias"),
            ("lenet", "conv2.weight", (16, 4, 5, 5), "conv2.weight"),
            ("lenet", "fc1.weight", (120, 256), r"fc1.weight.*\[120, 256\]"
                                                r".*400"),
            ("lenet", "fc2.weight", (84, 100), "fc2.weight"),
            ("lenet", "fc3.bias", (9,), "fc3.bias"),
            ("mlp", "fc1.weight", (32, 783), "fc1.weight.*784"),
            ("mlp", "fc3.weight", (10, 15), "fc3.weight"),
        ]
        for model, name, shape, pattern in cases:
            with self.subTest(name=name, shape=shape):
                tensors = dict(self.lenet if model == "lenet" else self.mlp)
                tensors[name] = np.zeros(shape, np.float32)
                with self.assertRaisesRegex(errors.ModelFileError, pattern):
                    models.check_model(tensors, model, (1, 28, 28))

    def test_metadata_parsing(self):
        model, shape, mean, std = models.parse_metadata(LENET_METADATA)
        self.assertEqual((model, shape, mean, std),
                         ("lenet", (1, 28, 28), 0.2860, 0.3530))
        bad = [({"model": "resnet"}, "'model'"),
               ({"input_shape": "1,28,28"}, "input_shape"),
               ({"input_shape": "[1,0,28]"}, "input_shape"),
               ({"input_mean": "abc"}, "input_mean"),
               ({"input_std": "0"}, "input_std"),
               ({"input_std": "nan"}, "input_std"),
               ({"input_std": "0.2,0,0.2"}, "input_std"),
               ({"input_mean": "0.5,x"}, "input_mean")]
        for change, pattern in bad:
            with self.subTest(change=change):
                with self.assertRaisesRegex(errors.ModelFileError, pattern):
                    models.parse_metadata({**LENET_METADATA, **change})
        # Per channel (images from files): arrays that broadcast over (N, C, H, W).
        _, _, mean, std = models.parse_metadata(
            {**LENET_METADATA, "input_mean": "0.485,0.456,0.406", "input_std": "0.229,0.224,0.225"})
        self.assertEqual(mean.shape, (3, 1, 1))
        np.testing.assert_allclose(std.ravel(), [0.229, 0.224, 0.225])


class AccuracyTest(unittest.TestCase):
    def test_counts(self):
        logits = np.array([[0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0],
                           [0.7, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
                           [0.7, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
        labels = np.array([1, 2, 1])
        # Rows 1 and 2 rank the classes 0, 6, 5, 4, 3, 2, 1: label 2 is
        # sixth and label 1 is last, so only row 0 counts.
        self.assertEqual(models.accuracy(logits, labels), (1, 1))
        self.assertEqual(models.accuracy(logits, np.array([1, 3, 0])), (2, 3))

    def test_ties_prefer_lowest_index(self):
        logits = np.zeros((2, 10))
        self.assertEqual(models.accuracy(logits, np.array([0, 1])), (1, 2))
        self.assertEqual(models.accuracy(logits, np.array([4, 5])), (0, 1))

    def test_ties_with_many_classes(self):
        # Wide rows, where an unstable sort would reorder equal logits.
        logits = np.zeros((3, 100))
        logits[2, 50:] = -1.0
        labels = np.array([0, 5, 4])
        self.assertEqual(models.accuracy(logits, labels), (1, 2))
        logits = np.repeat([[2.0, 1.0]], 50, axis=1)
        self.assertEqual(models.accuracy(logits, np.array([4])), (0, 1))
        self.assertEqual(models.accuracy(logits, np.array([50])), (0, 0))


if __name__ == "__main__":
    unittest.main()
