#!/usr/bin/python3
"""How far apart two exported models are: ||a - b|| / ||b|| over every tensor of two
.safetensors files with the same names (the measure gpu_training_test applies to a GPU run
against the CPU's).

  model_diff.py A.safetensors B.safetensors

Prints `relative_difference=<value> tensors=<count>`; exits 2 when a file cannot be read or
the two hold different tensor names or shapes.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_model  # noqa: E402  (the strict .safetensors reader)


def relative_difference(a, b):
    """a, b: name -> ndarray with the same names (in any order) and shapes."""
    if sorted(a) != sorted(b):
        raise check_model.CheckError(f"different tensors: {sorted(a)} against {sorted(b)}")
    diff = norm = 0.0
    for name, want in b.items():
        got = a[name]
        if got.shape != want.shape:
            raise check_model.CheckError(
                f"{name}: shape {list(got.shape)} against {list(want.shape)}")
        d = got.astype(np.float64) - want.astype(np.float64)
        diff += float((d * d).sum())
        norm += float((want.astype(np.float64) ** 2).sum())
    if norm == 0:
        raise check_model.CheckError("the second model is all zeros: nothing to be relative to")
    return (diff / norm) ** 0.5


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    args = parser.parse_args(argv)
    try:
        a, _ = check_model.read_safetensors(args.a)
        b, _ = check_model.read_safetensors(args.b)
        value = relative_difference(a, b)
    except check_model.CheckError as e:
        print(f"model_diff: {e}", file=sys.stderr)
        return 2
    print(f"relative_difference={value:.6g} tensors={len(b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
