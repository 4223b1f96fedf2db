#!/usr/bin/python3
"""Tests for model_diff.py."""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_diff  # noqa: E402
from numpy_model import testing  # noqa: E402  (its .safetensors writer)


class ModelDiffTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, tensors):
        path = os.path.join(self.dir.name, name)
        testing.write_safetensors(
            path, tensors, {"model": "mlp", "input_shape": "[2]"})
        return path

    def run_main(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = model_diff.main(list(args))
        return rc, out.getvalue().strip()

    def test_relative_difference_over_every_tensor(self):
        # b: (3, 4) and (0); a differs by 1 in the second tensor: 1 / ||(3, 4, 0)|| = 0.2.
        b = self.write("b.safetensors", [("w", [3.0, 4.0]), ("v", [0.0])])
        a = self.write("a.safetensors", [("w", [3.0, 4.0]), ("v", [1.0])])
        rc, out = self.run_main(a, b)
        self.assertEqual(rc, 0)
        self.assertEqual(out, "relative_difference=0.2 tensors=2")
        self.assertEqual(self.run_main(b, b), (0, "relative_difference=0 tensors=2"))
        reordered = self.write("r.safetensors", [("v", [1.0]), ("w", [3.0, 4.0])])
        self.assertEqual(self.run_main(reordered, b), (0, "relative_difference=0.2 tensors=2"))

    def test_a_zero_second_model_is_an_error(self):
        zero = self.write("z.safetensors", [("w", [0.0, 0.0])])
        other = self.write("o.safetensors", [("w", [1.0, 0.0])])
        self.assertEqual(self.run_main(other, zero)[0], 2)

    def test_different_names_or_shapes_are_errors(self):
        b = self.write("b.safetensors", [("w", [3.0, 4.0])])
        other_name = self.write("n.safetensors", [("u", [3.0, 4.0])])
        other_shape = self.write("s.safetensors", [("w", [3.0, 4.0, 5.0])])
        self.assertEqual(self.run_main(other_name, b)[0], 2)
        self.assertEqual(self.run_main(other_shape, b)[0], 2)
        self.assertEqual(self.run_main(os.path.join(self.dir.name, "missing"), b)[0], 2)


if __name__ == "__main__":
    unittest.main()
