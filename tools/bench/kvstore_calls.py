#!/usr/bin/python3
"""What one call of the Python kvstore costs on the CPU (the package's C side through ctypes):
the microseconds of a pushpull+wait of a small array on the local store (numpy arrays, and
torch tensors where Debian's python3-torch is), of borrowing one array (holding it, checking
its dtype and layout: a numpy array, another buffer) and of a bare ctypes call, each the median
of five runs of N calls. `bazel run //tools/bench:kvstore_calls [-- N [DIR]]`: DIR, a folder
holding another build of the package (an older commit's), to compare with.
"""

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[2] if len(sys.argv) > 2 else
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import cohort  # noqa: E402
from cohort import _cohort  # noqa: E402


def per_call(f, n):
    """Microseconds per call of f, the median of five runs of n calls."""
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            f()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    kv = cohort.kvstore.create("local")
    kv.set_optimizer("sgd", lr=0.5)
    kv.init(1, np.zeros(10, np.float32))
    grad, out = np.ones(10, np.float32), np.zeros(10, np.float32)
    store = kv._store
    print(f"kvstore_calls: {n} calls a run, median of 5 runs, Python {sys.version.split()[0]}, "
          f"{os.path.dirname(_cohort.__file__)}")
    print(f"pushpull+wait, 10 floats, local store: "
          f"{per_call(lambda: kv.pushpull(1, grad, out).wait(), n):.1f} us")
    try:
        import torch
        tgrad, tout = torch.ones(10), torch.zeros(10)
        print(f"the same, torch tensors:               "
              f"{per_call(lambda: kv.pushpull(1, tgrad, tout).wait(), n):.1f} us")
    except ImportError:
        pass
    if not hasattr(_cohort, "_borrow"):
        return  # a build from before the C interface
    print(f"borrow and release one numpy array:    "
          f"{per_call(lambda: _cohort._borrow(grad, False, 1, 'x').release(), n):.1f} us")
    view = memoryview(bytearray(40)).cast("f")
    print(f"the same, another buffer (memoryview): "
          f"{per_call(lambda: _cohort._borrow(view, False, 1, 'x').release(), n):.1f} us")
    print(f"bare ctypes call (rank):               "
          f"{per_call(lambda: store.rank, n):.2f} us")


if __name__ == "__main__":
    main()
