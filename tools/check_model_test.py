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
