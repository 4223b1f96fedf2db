#!/usr/bin/python3
"""Tests for check_model.py."""

import contextlib
import gzip
import io
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_model as cm  # noqa: E402

RESULT_LINE = re.compile(r"^top1=\d+\.\d\d top5=\d+\.\d\d n=\d+$")


# ---------------------------------------------------------------------------
# Writers used to build test inputs
# ---------------------------------------------------------------------------

def encode_tensor(array, dtype):
    array = np.asarray(array, dtype=np.float32)
    if dtype == "F32":
        return array.astype("<f4").tobytes()
    if dtype == "F16":
        return array.astype("<f2").tobytes()
    if dtype == "BF16":
        # Truncation is enough for values that are exact in bfloat16.
        return (array.view(np.uint32) >> 16).astype("<u2").tobytes()
    raise ValueError(dtype)


def build_safetensors(tensors, metadata, dtype="F32"):
    """Returns (header dict, data bytes) laid out like the trainer writes."""
    header = {"__metadata__": metadata} if metadata is not None else {}
    data = b""
    for name, array in tensors:
        raw = encode_tensor(array, dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(array)),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header, data


def write_raw_safetensors(path, header, data, header_len=None, pad=0):
    header_bytes = json.dumps(header).encode("utf-8") + b" " * pad
    if header_len is None:
        header_len = len(header_bytes)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", header_len) + header_bytes + data)


def write_safetensors(path, tensors, metadata, dtype="F32"):
    header, data = build_safetensors(tensors, metadata, dtype)
    write_raw_safetensors(path, header, data)


def write_idx(path, magic, array, count=None):
    """Writes an IDX file; count overrides the first dimension in the header."""
    array = np.asarray(array, dtype=np.uint8)
    dims = list(array.shape)
    if count is not None:
        dims[0] = count
    content = struct.pack(">I", magic) + b"".join(
        struct.pack(">I", d) for d in dims) + array.tobytes()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(content)


def lenet_tensors(rng, scale=0.1):
    shapes = [("conv1.weight", (6, 1, 5, 5)), ("conv1.bias", (6,)),
              ("conv2.weight", (16, 6, 5, 5)), ("conv2.bias", (16,)),
              ("fc1.weight", (120, 400)), ("fc1.bias", (120,)),
              ("fc2.weight", (84, 120)), ("fc2.bias", (84,)),
              ("fc3.weight", (10, 84)), ("fc3.bias", (10,))]
    return [(name, (rng.standard_normal(shape) * scale).astype(np.float32))
            for name, shape in shapes]


def mlp_tensors(rng, hidden=(32, 16)):
    shapes = [("fc1.weight", (hidden[0], 784)), ("fc1.bias", (hidden[0],)),
              ("fc2.weight", (hidden[1], hidden[0])),
              ("fc2.bias", (hidden[1],)),
              ("fc3.weight", (10, hidden[1])), ("fc3.bias", (10,))]
    return [(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))
            for name, shape in shapes]


# Depth of each CIFAR ResNet and its trainable parameter count (conv and fc
# weights, batch-norm gamma and beta) for 3 input channels and 10 classes.
RESNET_DEPTHS = {"resnet20": 20, "resnet32": 32, "resnet44": 44,
                 "resnet56": 56, "resnet110": 110}
RESNET_PARAMETERS = {"resnet20": 269722, "resnet32": 464154,
                     "resnet44": 658586, "resnet56": 853018,
                     "resnet110": 1727962}
RUNNING_STATS = (".running_mean", ".running_var")


def resnet_tensors(rng, model, in_channels=3, classes=10):
    """A random CIFAR ResNet in file order, its layout spelled out here
    rather than taken from check_model. Batch-norm statistics are kept near
    those of a trained net so activations stay of order one."""
    blocks = (RESNET_DEPTHS[model] - 2) // 6
    tensors = []

    def conv_bn(prefix, conv, bn, out_channels, conv_in_channels):
        fan_in = 9 * conv_in_channels
        tensors.append((f"{prefix}{conv}.weight", rng.standard_normal(
            (out_channels, conv_in_channels, 3, 3)) * np.sqrt(2 / fan_in)))
        tensors.append((f"{prefix}{bn}.weight",
                        rng.uniform(0.5, 1.5, out_channels)))
        tensors.append((f"{prefix}{bn}.bias",
                        rng.uniform(-0.2, 0.2, out_channels)))
        tensors.append((f"{prefix}{bn}.running_mean",
                        rng.uniform(-0.2, 0.2, out_channels)))
        tensors.append((f"{prefix}{bn}.running_var",
                        rng.uniform(0.5, 2.0, out_channels)))

    conv_bn("", "conv1", "bn1", 16, in_channels)
    planes_in = 16
    for stage, planes in ((1, 16), (2, 32), (3, 64)):
        for i in range(blocks):
            prefix = f"layer{stage}.{i}."
            conv_bn(prefix, "conv1", "bn1", planes, planes_in)
            conv_bn(prefix, "conv2", "bn2", planes, planes)
            planes_in = planes
    tensors.append(("fc.weight", rng.standard_normal((classes, 64)) * 0.1))
    tensors.append(("fc.bias", rng.standard_normal(classes) * 0.1))
    return [(name, a.astype(np.float32)) for name, a in tensors]


def resnet_metadata(model="resnet20", input_shape="[1,32,32]"):
    return {"model": model, "input_shape": input_shape,
            "input_mean": "0.2860", "input_std": "0.3530",
            "dataset": "fashion-mnist", "format": "pt"}


def write_cifar10(path, images, labels):
    records = np.concatenate(
        [np.asarray(labels, np.uint8)[:, None],
         np.asarray(images, np.uint8).reshape(len(labels), -1)], axis=1)
    with open(path, "wb") as f:
        f.write(records.tobytes())


LENET_METADATA = {"model": "lenet", "input_shape": "[1,28,28]",
                  "input_mean": "0.2860", "input_std": "0.3530"}
MLP_METADATA = {"model": "mlp", "input_shape": "[1,28,28]",
                "input_mean": "0.2860", "input_std": "0.3530"}


# ---------------------------------------------------------------------------
# Naive reference implementations
# ---------------------------------------------------------------------------

def naive_conv2d(x, weight, bias, padding):
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    xp = np.zeros((n, c, h + 2 * padding, w + 2 * padding))
    xp[:, :, padding:padding + h, padding:padding + w] = x
    oh, ow = h + 2 * padding - kh + 1, w + 2 * padding - kw + 1
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        for oc in range(o):
            for i in range(oh):
                for j in range(ow):
                    total = bias[oc]
                    for ic in range(c):
                        for di in range(kh):
                            for dj in range(kw):
                                total += (xp[b, ic, i + di, j + dj]
                                          * weight[oc, ic, di, dj])
                    out[b, oc, i, j] = total
    return out


def naive_maxpool2x2(x):
    n, c, h, w = x.shape
    out = np.zeros((n, c, h // 2, w // 2))
    for b in range(n):
        for ch in range(c):
            for i in range(h // 2):
                for j in range(w // 2):
                    out[b, ch, i, j] = max(x[b, ch, 2 * i + di, 2 * j + dj]
                                           for di in range(2)
                                           for dj in range(2))
    return out


def reference_conv3x3(x, weight, stride):
    """NCHW, padding 1: a sum over the nine taps at stride 1, then every
    stride-th output (what a strided convolution computes)."""
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + 2, w + 2))
    xp[:, :, 1:h + 1, 1:w + 1] = x
    out = np.zeros((n, weight.shape[0], h, w))
    for di in range(3):
        for dj in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, di:di + h, dj:dj + w],
                             weight[:, :, di, dj])
    return out[:, :, ::stride, ::stride]


def reference_batch_norm(x, t, name):
    def channel(suffix):
        return t[f"{name}.{suffix}"][None, :, None, None]
    return ((x - channel("running_mean"))
            / np.sqrt(channel("running_var") + 1e-5)
            * channel("weight") + channel("bias"))


def reference_shortcut(x, planes):
    n, c, h, w = x.shape
    y = np.zeros((n, planes, (h + 1) // 2, (w + 1) // 2))
    for ch in range(c):
        y[:, ch + planes // 4] = x[:, ch, ::2, ::2]
    return y


def reference_resnet(tensors, x, model):
    """Float64 NCHW forward pass of a CIFAR ResNet."""
    t = {n: a.astype(np.float64) for n, a in tensors.items()}
    blocks = (RESNET_DEPTHS[model] - 2) // 6

    def conv_bn(h, conv, bn, stride):
        return reference_batch_norm(
            reference_conv3x3(h, t[conv + ".weight"], stride), t, bn)

    h = np.maximum(conv_bn(x, "conv1", "bn1", 1), 0)
    for stage in (1, 2, 3):
        for i in range(blocks):
            p = f"layer{stage}.{i}"
            stride = 2 if stage > 1 and i == 0 else 1
            out = np.maximum(conv_bn(h, p + ".conv1", p + ".bn1", stride), 0)
            out = conv_bn(out, p + ".conv2", p + ".bn2", 1)
            planes = out.shape[1]
            shortcut = h if stride == 1 else reference_shortcut(h, planes)
            h = np.maximum(out + shortcut, 0)
    pooled = h.sum(axis=(2, 3)) / (h.shape[2] * h.shape[3])
    return pooled @ t["fc.weight"].T + t["fc.bias"]


class TempDirTestCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)


# ---------------------------------------------------------------------------
# safetensors reader
# ---------------------------------------------------------------------------

class ReadSafetensorsTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.tensors = [("b.weight", rng.standard_normal((3, 4))),
                        ("a.bias", rng.standard_normal((3,))),
                        ("scalar", np.float32(2.5)),
                        ("empty", np.zeros((0, 5)))]
        self.metadata = {"model": "mlp", "input_shape": "[12]", "x": "y"}

    def assert_rejected(self, header, data, pattern, **kwargs):
        path = self.path("bad.safetensors")
        write_raw_safetensors(path, header, data, **kwargs)
        with self.assertRaises(cm.ModelFileError) as ctx:
            cm.read_safetensors(path)
        message = str(ctx.exception)
        self.assertIn(path, message)
        self.assertRegex(message, pattern)

    def test_round_trip(self):
        path = self.path("ok.safetensors")
        write_safetensors(path, self.tensors, self.metadata)
        tensors, metadata = cm.read_safetensors(path)
        self.assertEqual(list(tensors), [n for n, _ in self.tensors])
        for name, expected in self.tensors:
            self.assertEqual(tensors[name].dtype, np.float32)
            self.assertEqual(tensors[name].shape, np.shape(expected))
            np.testing.assert_array_equal(
                tensors[name], np.asarray(expected, dtype=np.float32))
        self.assertEqual(metadata, self.metadata)

    def test_header_padding_spaces_accepted(self):
        path = self.path("padded.safetensors")
        header, data = build_safetensors(self.tensors, self.metadata)
        write_raw_safetensors(path, header, data, pad=7)
        tensors, _ = cm.read_safetensors(path)
        self.assertEqual(len(tensors), len(self.tensors))

    def test_f16_and_bf16(self):
        values = np.array([[1.0, -2.0, 0.5], [3.140625, 0.0, -0.75]],
                          dtype=np.float32)
        for dtype in ("F16", "BF16"):
            with self.subTest(dtype=dtype):
                path = self.path(f"{dtype}.safetensors")
                write_safetensors(path, [("w", values)], self.metadata, dtype)
                tensors, _ = cm.read_safetensors(path)
                self.assertEqual(tensors["w"].dtype, np.float32)
                np.testing.assert_array_equal(tensors["w"], values)

    def test_file_shorter_than_length_field(self):
        path = self.path("short.safetensors")
        with open(path, "wb") as f:
            f.write(b"\x10\x00\x00")
        with self.assertRaisesRegex(cm.ModelFileError, "too short"):
            cm.read_safetensors(path)

    def test_header_length_beyond_file(self):
        header, data = build_safetensors(self.tensors, self.metadata)
        header_len = len(json.dumps(header)) + len(data) + 1
        self.assert_rejected(header, data, "header length .* exceeds",
                             header_len=header_len)

    def test_header_not_json(self):
        path = self.path("bad.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", 5) + b"{abc}")
        with self.assertRaisesRegex(cm.ModelFileError, "not valid JSON"):
            cm.read_safetensors(path)

    def test_header_not_utf8(self):
        path = self.path("bad.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", 3) + b'"\xff"')
        with self.assertRaisesRegex(cm.ModelFileError, "UTF-8"):
            cm.read_safetensors(path)

    def test_header_not_object(self):
        self.assert_rejected([1, 2], b"", "expected an object")

    def test_header_garbage_after_object(self):
        path = self.path("bad.safetensors")
        header = json.dumps({"__metadata__": self.metadata}).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header) + 2) + header + b" x")
        with self.assertRaisesRegex(cm.ModelFileError, "after the JSON"):
            cm.read_safetensors(path)

    def test_duplicate_key(self):
        path = self.path("bad.safetensors")
        header = (b'{"__metadata__": {"model": "mlp", "input_shape": "[1]"},'
                  b' "__metadata__": {}}')
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
        with self.assertRaisesRegex(cm.ModelFileError, "duplicate key"):
            cm.read_safetensors(path)

    def test_first_offset_not_zero(self):
        header, data = build_safetensors(self.tensors[:1], self.metadata)
        header["b.weight"]["data_offsets"] = [4, 4 + 48]
        self.assert_rejected(header, b"\0" * 4 + data, "gap")

    def test_gap_between_offsets(self):
        header, data = build_safetensors(self.tensors[:2], self.metadata)
        header["a.bias"]["data_offsets"] = [52, 64]
        data = data[:48] + b"\0" * 4 + data[48:]
        self.assert_rejected(header, data, "'a.bias'.*gap")

    def test_overlapping_offsets(self):
        header, data = build_safetensors(self.tensors[:2], self.metadata)
        header["a.bias"]["data_offsets"] = [44, 56]
        self.assert_rejected(header, data[:56], "'a.bias'.*overlapping")

    def test_trailing_bytes(self):
        header, data = build_safetensors(self.tensors, self.metadata)
        self.assert_rejected(header, data + b"\0\0\0\0", "trailing bytes")

    def test_offsets_beyond_data(self):
        header, data = build_safetensors(self.tensors[:2], self.metadata)
        self.assert_rejected(header, data[:-4],
                             "'a.bias'.*beyond the end of the data")

    def test_unknown_dtype(self):
        for dtype in ("F64", "I32", "U8", 7):
            with self.subTest(dtype=dtype):
                header, data = build_safetensors(self.tensors, self.metadata)
                header["a.bias"]["dtype"] = dtype
                self.assert_rejected(header, data,
                                     "'a.bias'.*unsupported dtype")

    def test_size_mismatch_with_shape(self):
        header, data = build_safetensors(self.tensors, self.metadata)
        header["b.weight"]["shape"] = [4, 4]
        self.assert_rejected(header, data, "'b.weight'.*size mismatch")

    def test_bad_shape(self):
        for shape in ([3, -4], [3, 4.0], "12", [True, 12]):
            with self.subTest(shape=shape):
                header, data = build_safetensors(self.tensors, self.metadata)
                header["b.weight"]["shape"] = shape
                self.assert_rejected(header, data, "'b.weight'.*shape")

    def test_bad_offsets(self):
        for offsets in ([0], [0, 48, 96], [-1, 47], [48, 0], "0,48"):
            with self.subTest(offsets=offsets):
                header, data = build_safetensors(self.tensors, self.metadata)
                header["b.weight"]["data_offsets"] = offsets
                self.assert_rejected(header, data, "'b.weight'.*data_offsets")

    def test_unexpected_entry_key(self):
        header, data = build_safetensors(self.tensors, self.metadata)
        header["a.bias"]["extra"] = 1
        self.assert_rejected(header, data, "'a.bias'.*unexpected.*extra")

    def test_missing_metadata(self):
        header, data = build_safetensors(self.tensors, None)
        self.assert_rejected(header, data, "no __metadata__")

    def test_metadata_missing_required_keys(self):
        for key in ("model", "input_shape"):
            with self.subTest(key=key):
                metadata = dict(self.metadata)
                del metadata[key]
                header, data = build_safetensors(self.tensors, metadata)
                self.assert_rejected(header, data, f"no '{key}' entry")

    def test_metadata_not_strings(self):
        header, data = build_safetensors(
            self.tensors, {"model": "mlp", "input_shape": [12]})
        self.assert_rejected(header, data, "'input_shape'.*expected a string")
        header, data = build_safetensors(self.tensors, self.metadata)
        header["__metadata__"] = ["model", "mlp"]
        self.assert_rejected(header, data, "__metadata__ is not a JSON object")


class DecodeTensorTest(unittest.TestCase):
    def test_bf16_known_values(self):
        cases = {0x3F80: 1.0, 0xC000: -2.0, 0x4049: 3.140625,
                 0x3E80: 0.25, 0x0000: 0.0, 0x7F80: np.inf, 0xFF80: -np.inf,
                 0x4B80: 16777216.0}
        raw = struct.pack(f"<{len(cases)}H", *cases)
        decoded = cm.decode_tensor(raw, "BF16", [len(cases)])
        self.assertEqual(decoded.dtype, np.float32)
        np.testing.assert_array_equal(decoded, list(cases.values()))

    def test_bf16_negative_zero_and_nan(self):
        decoded = cm.decode_tensor(struct.pack("<2H", 0x8000, 0x7FC0),
                                   "BF16", [2])
        self.assertEqual(decoded[0], 0.0)
        self.assertTrue(np.signbit(decoded[0]))
        self.assertTrue(np.isnan(decoded[1]))

    def test_f16_known_values(self):
        raw = struct.pack("<3H", 0x3C00, 0xC000, 0x3555)
        np.testing.assert_allclose(cm.decode_tensor(raw, "F16", [3, 1]),
                                   [[1.0], [-2.0], [0.333251953125]])


# ---------------------------------------------------------------------------
# Model structure and forward pass
# ---------------------------------------------------------------------------

class ConvPoolTest(unittest.TestCase):
    def test_conv2d_matches_naive(self):
        rng = np.random.default_rng(1)
        for (n, c, h, w, o, k, padding) in [(2, 1, 9, 8, 3, 5, 2),
                                            (3, 4, 7, 7, 2, 3, 0),
                                            (1, 2, 6, 5, 4, 5, 0),
                                            (2, 3, 4, 6, 2, 2, 1)]:
            with self.subTest(shape=(n, c, h, w), kernel=(o, k),
                              padding=padding):
                x = rng.standard_normal((n, c, h, w))
                weight = rng.standard_normal((o, c, k, k))
                bias = rng.standard_normal(o)
                got = cm.conv2d(x, weight, bias, padding)
                want = naive_conv2d(x, weight, bias, padding)
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)

    def test_conv2d_is_not_correlation_transposed(self):
        # An asymmetric kernel catches flipped or transposed weights.
        x = np.zeros((1, 1, 3, 3))
        x[0, 0, 0, 0] = 1.0
        weight = np.arange(9, dtype=np.float64).reshape(1, 1, 3, 3)
        out = cm.conv2d(x, weight, np.zeros(1), padding=1)
        # Output (i, j) sees input (i + di - 1, j + dj - 1).
        self.assertEqual(out[0, 0, 0, 0], weight[0, 0, 1, 1])
        self.assertEqual(out[0, 0, 0, 1], weight[0, 0, 1, 0])
        self.assertEqual(out[0, 0, 1, 0], weight[0, 0, 0, 1])

    def test_maxpool_matches_naive(self):
        rng = np.random.default_rng(2)
        for shape in [(2, 3, 8, 8), (1, 2, 7, 9), (3, 1, 2, 3)]:
            with self.subTest(shape=shape):
                x = rng.standard_normal(shape)
                got = cm.maxpool2x2(x)
                want = naive_maxpool2x2(x)
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)

    def test_forward_lenet_matches_naive(self):
        rng = np.random.default_rng(3)
        tensors = {n: a for n, a in lenet_tensors(rng)}
        x = rng.standard_normal((2, 1, 28, 28))
        t = {n: a.astype(np.float64) for n, a in tensors.items()}
        h = naive_maxpool2x2(np.maximum(naive_conv2d(
            x, t["conv1.weight"], t["conv1.bias"], 2), 0))
        h = naive_maxpool2x2(np.maximum(naive_conv2d(
            h, t["conv2.weight"], t["conv2.bias"], 0), 0))
        # Flatten in C*H*W order, one element at a time.
        flat = np.array([[h[b, c, i, j] for c in range(16) for i in range(5)
                          for j in range(5)] for b in range(2)])
        h = np.maximum(flat @ t["fc1.weight"].T + t["fc1.bias"], 0)
        h = np.maximum(h @ t["fc2.weight"].T + t["fc2.bias"], 0)
        want = h @ t["fc3.weight"].T + t["fc3.bias"]
        got = cm.forward_lenet(tensors, x)
        self.assertEqual(got.shape, (2, 10))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)

    def test_forward_mlp(self):
        rng = np.random.default_rng(4)
        tensors = {n: a for n, a in mlp_tensors(rng)}
        x = rng.standard_normal((3, 1, 28, 28))
        t = {n: a.astype(np.float64) for n, a in tensors.items()}
        h = x.reshape(3, 784)
        h = np.maximum(h @ t["fc1.weight"].T + t["fc1.bias"], 0)
        h = np.maximum(h @ t["fc2.weight"].T + t["fc2.bias"], 0)
        want = h @ t["fc3.weight"].T + t["fc3.bias"]
        np.testing.assert_allclose(cm.forward_mlp(tensors, x), want,
                                   rtol=0, atol=1e-10)


class ResnetLayersTest(unittest.TestCase):
    def test_conv3x3_matches_naive(self):
        rng = np.random.default_rng(10)
        for (n, c, h, w, o, stride) in [(2, 3, 6, 5, 4, 1),
                                        (1, 2, 7, 7, 3, 2),
                                        (2, 4, 8, 6, 5, 2),
                                        (1, 1, 1, 2, 2, 2)]:
            with self.subTest(shape=(n, c, h, w), out=o, stride=stride):
                x = rng.standard_normal((n, c, h, w))
                weight = rng.standard_normal((o, c, 3, 3))
                want = naive_conv2d(x, weight, np.zeros(o), 1)
                want = want[:, :, ::stride, ::stride]
                # PyTorch's output size: (H + 2 * 1 - 3) // stride + 1.
                self.assertEqual(want.shape[2:], ((h - 1) // stride + 1,
                                                  (w - 1) // stride + 1))
                got = cm.conv3x3(x.transpose(0, 2, 3, 1), weight, stride)
                self.assertEqual(got.shape, (n,) + want.shape[2:] + (o,))
                np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want,
                                           rtol=0, atol=1e-10)

    def test_batch_norm_by_hand(self):
        eps = 1e-5
        t = {"bn.weight": np.array([2.0, 1.0, 3.0]),
             "bn.bias": np.array([0.5, -1.0, 0.0]),
             "bn.running_mean": np.array([1.0, 4.0, 0.0]),
             # sqrt(var + eps) is 2, 0.5 and sqrt(eps).
             "bn.running_var": np.array([4.0 - eps, 0.25 - eps, 0.0])}
        x = np.array([[[[1.0, 2.0, 1e-3], [3.0, 4.0, -1e-3]]]])  # [1,1,2,3]
        want = np.array([[[[0.5, -5.0, 3e-3 / np.sqrt(eps)],
                           [2.5, -1.0, -3e-3 / np.sqrt(eps)]]]])
        np.testing.assert_allclose(cm.batch_norm(x, t, "bn"), want,
                                   rtol=1e-12)

    def test_option_a_shortcut_by_hand(self):
        # Channels last: x[0, i, j] = [10 * i + j, -(10 * i + j)], 3x3.
        x = np.array([[[[10 * i + j, -(10 * i + j)] for j in range(3)]
                       for i in range(3)]], dtype=np.float64)
        y = cm.option_a_shortcut(x, 4)
        # Rows and columns 0 and 2 are kept; one zero channel each side.
        want = np.array([[[[0, 0, 0, 0], [0, 2, -2, 0]],
                          [[0, 20, -20, 0], [0, 22, -22, 0]]]])
        self.assertEqual(y.shape, (1, 2, 2, 4))
        np.testing.assert_array_equal(y, want)

    def test_option_a_shortcut_stage_sizes(self):
        rng = np.random.default_rng(11)
        for c, h in ((16, 32), (32, 16)):
            with self.subTest(channels=c):
                x = rng.standard_normal((2, h, h, c))
                y = cm.option_a_shortcut(x, 2 * c)
                self.assertEqual(y.shape, (2, h // 2, h // 2, 2 * c))
                np.testing.assert_array_equal(y[..., :c // 2], 0)
                np.testing.assert_array_equal(y[..., c // 2:c // 2 + c],
                                              x[:, ::2, ::2])
                np.testing.assert_array_equal(y[..., c // 2 + c:], 0)

    def test_forward_resnet20_matches_reference(self):
        rng = np.random.default_rng(12)
        for channels, size in ((3, 32), (1, 20)):
            with self.subTest(channels=channels, size=size):
                tensors = dict(resnet_tensors(rng, "resnet20", channels))
                x = rng.standard_normal((2, channels, size, size))
                want = reference_resnet(tensors, x, "resnet20")
                got = cm.forward_resnet(tensors, x, "resnet20")
                self.assertEqual(got.shape, (2, 10))
                np.testing.assert_allclose(
                    got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())

    def test_forward_resnet_chunks_agree(self):
        rng = np.random.default_rng(13)
        tensors = dict(resnet_tensors(rng, "resnet20", 1))
        x = rng.standard_normal((3, 1, 8, 8))
        whole = cm.forward_resnet(tensors, x, "resnet20")
        with mock.patch.object(cm, "RESNET_CHUNK", 1), \
                mock.patch.object(cm, "_cpu_count", lambda: 2):
            chunked = cm.forward_resnet(tensors, x, "resnet20")
        np.testing.assert_allclose(chunked, whole, rtol=1e-6, atol=1e-6)


class CheckResnetTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(14)
        self.tensors = dict(resnet_tensors(self.rng, "resnet20"))

    def check(self, tensors, model="resnet20", input_shape=(3, 32, 32)):
        return cm.check_model(tensors, model, input_shape)

    def test_parameter_counts(self):
        for model, expected in RESNET_PARAMETERS.items():
            with self.subTest(model=model):
                tensors = resnet_tensors(self.rng, model)
                trainable = sum(a.size for n, a in tensors
                                if not n.endswith(RUNNING_STATS))
                self.assertEqual(trainable, expected)
                self.assertEqual(self.check(dict(tensors), model), 10)
                shapes = cm.resnet_tensor_shapes(model, 3, 10)
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
        with self.assertRaisesRegex(cm.ModelFileError,
                                    r"conv1.weight .*\[16, 3, 3, 3\]"):
            self.check(tensors, "resnet32", (3, 32, 32))

    def test_missing_and_unexpected(self):
        del self.tensors["layer2.1.bn2.running_var"]
        self.tensors["layer2.0.shortcut.weight"] = np.zeros(1, np.float32)
        with self.assertRaisesRegex(
                cm.ModelFileError,
                r"missing \['layer2.1.bn2.running_var'\], "
                r"unexpected \['layer2.0.shortcut.weight'\]"):
            self.check(self.tensors)

    def test_depth_must_match(self):
        tensors = dict(resnet_tensors(self.rng, "resnet32"))
        with self.assertRaisesRegex(cm.ModelFileError,
                                    r"unexpected \['layer1.3.conv1.weight'"):
            self.check(tensors, "resnet20")
        with self.assertRaisesRegex(cm.ModelFileError,
                                    r"missing \['layer1.3.conv1.weight'"):
            self.check(self.tensors, "resnet32")

    def test_out_of_order(self):
        items = list(self.tensors.items())
        items[1], items[2] = items[2], items[1]
        with self.assertRaisesRegex(cm.ModelFileError,
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
                        cm.ModelFileError,
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
                        cm.ModelFileError,
                        r"tensor layer1.2.bn1.running_var holds .* at index "
                        r"5, but a running variance must be >= 0"):
                    self.check(tensors)
        # Zero is a valid variance: eps keeps the division finite.
        self.tensors["bn1.running_var"] = np.zeros(16, np.float32)
        self.assertEqual(self.check(self.tensors), 10)

    def test_input_shape_must_be_chw(self):
        with self.assertRaisesRegex(cm.ModelFileError,
                                    r"resnet20 needs a \[C, H, W\]"):
            self.check(self.tensors, input_shape=(3072,))

    def test_metadata_models(self):
        for model in RESNET_DEPTHS:
            with self.subTest(model=model):
                parsed = cm.parse_metadata(resnet_metadata(model, "[3,32,32]"))
                self.assertEqual(parsed[:2], (model, (3, 32, 32)))
        with self.assertRaisesRegex(cm.ModelFileError,
                                    "'model'.*'resnet18'.*'resnet110'"):
            cm.parse_metadata(resnet_metadata("resnet18"))


class PadImagesTest(unittest.TestCase):
    def test_pads_equally_with_zero_pixels(self):
        images = np.arange(1, 13, dtype=np.uint8).reshape(2, 1, 2, 3)
        padded = cm.pad_images(images, (1, 4, 5))
        self.assertEqual(padded.dtype, np.uint8)
        want = np.zeros((2, 1, 4, 5), np.uint8)
        want[:, :, 1:3, 1:4] = images
        np.testing.assert_array_equal(padded, want)

    def test_fashion_mnist_to_32(self):
        images = np.full((3, 1, 28, 28), 200, np.uint8)
        padded = cm.pad_images(images, (1, 32, 32))
        self.assertEqual(padded.shape, (3, 1, 32, 32))
        self.assertEqual(int(padded[:, :, 2:30, 2:30].min()), 200)
        self.assertEqual(int(padded.sum()), 200 * 3 * 28 * 28)

    def test_same_size_unchanged(self):
        images = np.ones((2, 3, 32, 32), np.uint8)
        self.assertIs(cm.pad_images(images, (3, 32, 32)), images)

    def test_rejected(self):
        images = np.zeros((2, 1, 28, 28), np.uint8)
        cases = [((3, 32, 32), "has 3 channels but the test images have 1"),
                 ((1, 27, 32), "smaller than the 28x28"),
                 ((1, 32, 26), "smaller than the 28x28"),
                 ((1, 31, 32), "cannot be padded equally"),
                 ((1, 32, 29), "cannot be padded equally")]
        for input_shape, pattern in cases:
            with self.subTest(input_shape=input_shape):
                with self.assertRaisesRegex(cm.CheckError, pattern):
                    cm.pad_images(images, input_shape)


class CheckModelTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(5)
        self.lenet = dict(lenet_tensors(rng))
        self.mlp = dict(mlp_tensors(rng))

    def test_valid_models(self):
        self.assertEqual(cm.check_model(self.lenet, "lenet", (1, 28, 28)), 10)
        self.assertEqual(cm.check_model(self.mlp, "mlp", (1, 28, 28)), 10)
        self.assertEqual(cm.check_model(self.mlp, "mlp", (784,)), 10)

    def test_missing_tensor(self):
        del self.lenet["conv2.bias"]
        with self.assertRaisesRegex(cm.ModelFileError,
                                    r"missing \['conv2.bias'\]"):
            cm.check_model(self.lenet, "lenet", (1, 28, 28))

    def test_unexpected_tensor(self):
        self.mlp["conv1.weight"] = np.zeros((6, 1, 5, 5), np.float32)
        with self.assertRaisesRegex(cm.ModelFileError,
                                    r"unexpected \['conv1.weight'\]"):
            cm.check_model(self.mlp, "mlp", (1, 28, 28))

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
                with self.assertRaisesRegex(cm.ModelFileError, pattern):
                    cm.check_model(tensors, model, (1, 28, 28))

    def test_metadata_parsing(self):
        model, shape, mean, std = cm.parse_metadata(LENET_METADATA)
        self.assertEqual((model, shape, mean, std),
                         ("lenet", (1, 28, 28), 0.2860, 0.3530))
        bad = [({"model": "resnet"}, "'model'"),
               ({"input_shape": "1,28,28"}, "input_shape"),
               ({"input_shape": "[1,0,28]"}, "input_shape"),
               ({"input_mean": "abc"}, "input_mean"),
               ({"input_std": "0"}, "input_std"),
               ({"input_std": "nan"}, "input_std")]
        for change, pattern in bad:
            with self.subTest(change=change):
                with self.assertRaisesRegex(cm.ModelFileError, pattern):
                    cm.parse_metadata({**LENET_METADATA, **change})


class AccuracyTest(unittest.TestCase):
    def test_counts(self):
        logits = np.array([[0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0],
                           [0.7, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
                           [0.7, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]])
        labels = np.array([1, 2, 1])
        # Rows 1 and 2 rank the classes 0, 6, 5, 4, 3, 2, 1: label 2 is
        # sixth and label 1 is last, so only row 0 counts.
        self.assertEqual(cm.accuracy(logits, labels), (1, 1))
        self.assertEqual(cm.accuracy(logits, np.array([1, 3, 0])), (2, 3))

    def test_ties_prefer_lowest_index(self):
        logits = np.zeros((2, 10))
        self.assertEqual(cm.accuracy(logits, np.array([0, 1])), (1, 2))
        self.assertEqual(cm.accuracy(logits, np.array([4, 5])), (0, 1))

    def test_ties_with_many_classes(self):
        # Wide rows, where an unstable sort would reorder equal logits.
        logits = np.zeros((3, 100))
        logits[2, 50:] = -1.0
        labels = np.array([0, 5, 4])
        self.assertEqual(cm.accuracy(logits, labels), (1, 2))
        logits = np.repeat([[2.0, 1.0]], 50, axis=1)
        self.assertEqual(cm.accuracy(logits, np.array([4])), (0, 1))
        self.assertEqual(cm.accuracy(logits, np.array([50])), (0, 0))


# ---------------------------------------------------------------------------
# IDX readers
# ---------------------------------------------------------------------------

class IdxTest(TempDirTestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(6)
        self.images = rng.integers(0, 256, (7, 4, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 10, 7, dtype=np.uint8)

    def test_round_trip_gzip_and_plain(self):
        for suffix in (".gz", ""):
            with self.subTest(suffix=suffix):
                images_path = self.path("images" + suffix)
                labels_path = self.path("labels" + suffix)
                write_idx(images_path, cm.IDX_IMAGES_MAGIC, self.images)
                write_idx(labels_path, cm.IDX_LABELS_MAGIC, self.labels)
                np.testing.assert_array_equal(
                    cm.read_idx_images(images_path), self.images)
                np.testing.assert_array_equal(
                    cm.read_idx_labels(labels_path), self.labels)

    def test_wrong_magic(self):
        for suffix in (".gz", ""):
            with self.subTest(suffix=suffix):
                images_path = self.path("images" + suffix)
                labels_path = self.path("labels" + suffix)
                # Each written with the other's magic number.
                write_idx(images_path, cm.IDX_LABELS_MAGIC, self.images)
                write_idx(labels_path, cm.IDX_IMAGES_MAGIC, self.labels)
                with self.assertRaisesRegex(cm.DataFileError,
                                            re.escape(images_path) +
                                            ".*wrong magic"):
                    cm.read_idx_images(images_path)
                with self.assertRaisesRegex(cm.DataFileError,
                                            re.escape(labels_path) +
                                            ".*wrong magic"):
                    cm.read_idx_labels(labels_path)

    def test_truncated_data(self):
        for suffix in (".gz", ""):
            with self.subTest(suffix=suffix):
                images_path = self.path("images" + suffix)
                labels_path = self.path("labels" + suffix)
                write_idx(images_path, cm.IDX_IMAGES_MAGIC, self.images,
                          count=8)
                write_idx(labels_path, cm.IDX_LABELS_MAGIC, self.labels,
                          count=8)
                with self.assertRaisesRegex(cm.DataFileError, "truncated"):
                    cm.read_idx_images(images_path)
                with self.assertRaisesRegex(cm.DataFileError, "truncated"):
                    cm.read_idx_labels(labels_path)

    def test_trailing_bytes(self):
        path = self.path("labels")
        write_idx(path, cm.IDX_LABELS_MAGIC, self.labels, count=6)
        with self.assertRaisesRegex(cm.DataFileError, "trailing bytes"):
            cm.read_idx_labels(path)

    def test_truncated_header(self):
        path = self.path("images")
        with open(path, "wb") as f:
            f.write(struct.pack(">II", cm.IDX_IMAGES_MAGIC, 7))
        with self.assertRaisesRegex(cm.DataFileError, "too short"):
            cm.read_idx_images(path)

    def test_corrupt_gzip(self):
        path = self.path("images.gz")
        with open(path, "wb") as f:
            f.write(b"not gzip at all")
        with self.assertRaisesRegex(cm.DataFileError,
                                    re.escape(path) + ".*cannot read"):
            cm.read_idx_images(path)
        # A gzip stream cut short.
        write_idx(path, cm.IDX_IMAGES_MAGIC, self.images)
        with open(path, "rb") as f:
            content = f.read()
        with open(path, "wb") as f:
            f.write(content[:len(content) // 2])
        with self.assertRaisesRegex(cm.DataFileError, "cannot read"):
            cm.read_idx_images(path)

    def test_mismatched_counts(self):
        write_idx(self.path(cm.TEST_IMAGES + ".gz"), cm.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
                  self.labels[:6])
        with self.assertRaisesRegex(cm.DataFileError, "7 images .* 6 labels"):
            cm.load_test_set(self.dir)

    def test_gzip_preferred_plain_fallback(self):
        write_idx(self.path(cm.TEST_IMAGES), cm.IDX_IMAGES_MAGIC,
                  self.images[:2])
        write_idx(self.path(cm.TEST_LABELS), cm.IDX_LABELS_MAGIC,
                  self.labels[:2])
        images, labels = cm.load_test_set(self.dir)
        self.assertEqual(len(images), 2)
        write_idx(self.path(cm.TEST_IMAGES + ".gz"), cm.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
                  self.labels)
        images, labels = cm.load_test_set(self.dir)
        np.testing.assert_array_equal(images, self.images)
        np.testing.assert_array_equal(labels, self.labels)

    def test_missing_files(self):
        with self.assertRaisesRegex(cm.DataFileError, "not found"):
            cm.load_test_set(self.dir)

    def test_load_images_adds_channel_axis(self):
        write_idx(self.path(cm.TEST_IMAGES + ".gz"), cm.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
                  self.labels)
        images, labels = cm.load_images(self.dir)
        np.testing.assert_array_equal(images, self.images[:, None])
        np.testing.assert_array_equal(labels, self.labels)


class Cifar10Test(TempDirTestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(15)
        self.images = rng.integers(0, 256, (5, 3, 32, 32), dtype=np.uint8)
        self.labels = np.array([3, 0, 9, 1, 3], np.uint8)
        self.batch = self.path(cm.CIFAR10_TEST_BATCH)

    def test_round_trip(self):
        write_cifar10(self.batch, self.images, self.labels)
        images, labels = cm.read_cifar10_batch(self.batch)
        np.testing.assert_array_equal(images, self.images)
        np.testing.assert_array_equal(labels, self.labels)

    def test_record_layout(self):
        # Label byte, then the red, green and blue planes, each row by row.
        record = bytes([7]) + bytes(range(256)) * 12
        with open(self.batch, "wb") as f:
            f.write(record)
        images, labels = cm.read_cifar10_batch(self.batch)
        self.assertEqual(labels.tolist(), [7])
        self.assertEqual(images.shape, (1, 3, 32, 32))
        self.assertEqual(images[0, 0, 0, 5], 5)
        self.assertEqual(images[0, 0, 1, 0], 32)
        self.assertEqual(images[0, 1, 0, 0], (32 * 32) % 256)

    def test_partial_record(self):
        write_cifar10(self.batch, self.images, self.labels)
        with open(self.batch, "ab") as f:
            f.write(b"\0" * 100)
        with self.assertRaisesRegex(cm.DataFileError,
                                    re.escape(self.batch) +
                                    ".*not a whole number of 3073-byte"):
            cm.read_cifar10_batch(self.batch)

    def test_bad_label(self):
        self.labels[2] = 10
        write_cifar10(self.batch, self.images, self.labels)
        with self.assertRaisesRegex(cm.DataFileError,
                                    "record 2 has label 10, expected 0 to 9"):
            cm.read_cifar10_batch(self.batch)

    def test_preferred_over_idx(self):
        write_idx(self.path(cm.TEST_IMAGES), cm.IDX_IMAGES_MAGIC,
                  np.zeros((2, 28, 28)))
        write_idx(self.path(cm.TEST_LABELS), cm.IDX_LABELS_MAGIC,
                  np.zeros(2))
        write_cifar10(self.batch, self.images, self.labels)
        images, labels = cm.load_images(self.dir)
        self.assertEqual(images.shape, (5, 3, 32, 32))
        np.testing.assert_array_equal(labels, self.labels)


# ---------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------

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
        write_idx(self.path(cm.TEST_IMAGES + ".gz"), cm.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
                  self.labels)
        self.model_path = self.path("model.safetensors")

    def run_main(self, *args):
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            code = cm.main([self.model_path, "--data_dir", self.dir, *args])
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
        logits = cm.forward_lenet(dict(tensors), x.reshape(self.N, 1, 28, 28))
        top1, top5 = cm.accuracy(logits, self.labels.astype(np.int64))
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
        write_idx(self.path(cm.TEST_IMAGES + ".gz"), cm.IDX_IMAGES_MAGIC,
                  self.images)
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
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
        logits = cm.forward_mlp(dict(tensors), x)
        top1, top5 = cm.accuracy(logits, self.labels.astype(np.int64))
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
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
                  self.labels[:-1])
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 2)
        self.assertEqual(stdout, "")
        self.assertIn(cm.TEST_LABELS, stderr)

    def direct_result(self, tensors, model, images, mean=0.2860, std=0.3530):
        """The result line from cm.forward_resnet on already padded images."""
        x = (images / 255.0 - mean) / std
        logits = cm.forward_resnet(dict(tensors), x, model)
        top1, top5 = cm.accuracy(logits, self.labels.astype(np.int64))
        return (f"top1={100 * top1 / self.N:.2f} "
                f"top5={100 * top5 / self.N:.2f} n={self.N}")

    def test_resnet20_pads_fashion_mnist(self):
        tensors = resnet_tensors(self.rng, "resnet20", 1)
        write_safetensors(self.model_path, tensors, resnet_metadata())
        # 28x28 -> 32x32 with two zero pixels on every side.
        padded = np.pad(self.images[:, None], ((0, 0), (0, 0), (2, 2), (2, 2)))
        want = self.direct_result(tensors, "resnet20", padded)
        top1, top5, n = cm.evaluate(self.model_path, self.dir, batch=7)
        self.assertEqual(f"top1={top1:.2f} top5={top5:.2f} n={n}", want)
        code, stdout, stderr = self.run_main("--batch", "7")
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), want)

    def test_resnet_bf16_file(self):
        tensors = resnet_tensors(self.rng, "resnet20", 1)
        # Values that bfloat16 holds exactly, so both paths see the same.
        tensors = [(n, cm.decode_tensor(encode_tensor(a, "BF16"), "BF16",
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
        write_idx(self.path(cm.TEST_LABELS + ".gz"), cm.IDX_LABELS_MAGIC,
                  np.ones(self.N))
        code, stdout, stderr = self.run_main()
        self.assertEqual(code, 0, stderr)
        self.assertEqual(stdout.strip(), f"top1=100.00 top5=100.00 n={self.N}")

    def test_resnet_on_cifar10(self):
        images = self.rng.integers(0, 256, (self.N, 3, 32, 32),
                                   dtype=np.uint8)
        write_cifar10(self.path(cm.CIFAR10_TEST_BATCH), images, self.labels)
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
        self.assertIn("missing.safetensors", result.stderr)


if __name__ == "__main__":
    unittest.main()
