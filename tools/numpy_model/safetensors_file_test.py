#!/usr/bin/python3
"""Tests for safetensors_file.py: the strict reader and the dtypes it decodes."""

import json
import os
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_model import errors, safetensors_file  # noqa: E402
from numpy_model.testing import (  # noqa: E402
    build_safetensors, write_raw_safetensors, write_safetensors, TempDirTestCase)


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
        with self.assertRaises(errors.ModelFileError) as ctx:
            safetensors_file.read_safetensors(path)
        message = str(ctx.exception)
        self.assertIn(path, message)
        self.assertRegex(message, pattern)

    def test_round_trip(self):
        path = self.path("ok.safetensors")
        write_safetensors(path, self.tensors, self.metadata)
        tensors, metadata = safetensors_file.read_safetensors(path)
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
        tensors, _ = safetensors_file.read_safetensors(path)
        self.assertEqual(len(tensors), len(self.tensors))

    def test_f16_and_bf16(self):
        values = np.array([[1.0, -2.0, 0.5], [3.140625, 0.0, -0.75]],
                          dtype=np.float32)
        for dtype in ("F16", "BF16"):
            with self.subTest(dtype=dtype):
                path = self.path(f"{dtype}.safetensors")
                write_safetensors(path, [("w", values)], self.metadata, dtype)
                tensors, _ = safetensors_file.read_safetensors(path)
                self.assertEqual(tensors["w"].dtype, np.float32)
                np.testing.assert_array_equal(tensors["w"], values)

    def test_file_shorter_than_length_field(self):
        path = self.path("short.safetensors")
        with open(path, "wb") as f:
            f.write(b"\x10\x00\x00")
        with self.assertRaisesRegex(errors.ModelFileError, "too short"):
            safetensors_file.read_safetensors(path)

    def test_header_length_beyond_file(self):
        header, data = build_safetensors(self.tensors, self.metadata)
        header_len = len(json.dumps(header)) + len(data) + 1
        self.assert_rejected(header, data, "header length .* exceeds",
                             header_len=header_len)

    def test_header_not_json(self):
        path = self.path("bad.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", 5) + b"{abc}")
        with self.assertRaisesRegex(errors.ModelFileError, "not valid JSON"):
            safetensors_file.read_safetensors(path)

    def test_header_not_utf8(self):
        path = self.path("bad.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", 3) + b'"\xff"')
        with self.assertRaisesRegex(errors.ModelFileError, "UTF-8"):
            safetensors_file.read_safetensors(path)

    def test_header_not_object(self):
        self.assert_rejected([1, 2], b"", "expected an object")

    def test_header_garbage_after_object(self):
        path = self.path("bad.safetensors")
        header = json.dumps({"__metadata__": self.metadata}).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header) + 2) + header + b" x")
        with self.assertRaisesRegex(errors.ModelFileError, "after the JSON"):
            safetensors_file.read_safetensors(path)

    def test_duplicate_key(self):
        path = self.path("bad.safetensors")
        header = (b'{"__metadata__": {"model": "mlp", "input_shape": "[1]"},'
                  b' "__metadata__": {}}')
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
        with self.assertRaisesRegex(errors.ModelFileError, "duplicate key"):
            safetensors_file.read_safetensors(path)

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
        decoded = safetensors_file.decode_tensor(raw, "BF16", [len(cases)])
        self.assertEqual(decoded.dtype, np.float32)
        np.testing.assert_array_equal(decoded, list(cases.values()))

    def test_bf16_negative_zero_and_nan(self):
        decoded = safetensors_file.decode_tensor(struct.pack("<2H", 0x8000, 0x7FC0),
                                   "BF16", [2])
        self.assertEqual(decoded[0], 0.0)
        self.assertTrue(np.signbit(decoded[0]))
        self.assertTrue(np.isnan(decoded[1]))

    def test_f16_known_values(self):
        raw = struct.pack("<3H", 0x3C00, 0xC000, 0x3555)
        np.testing.assert_allclose(safetensors_file.decode_tensor(raw, "F16", [3, 1]),
                                   [[1.0], [-2.0], [0.333251953125]])


if __name__ == "__main__":
    unittest.main()
