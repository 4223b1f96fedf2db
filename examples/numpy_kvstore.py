#!/usr/bin/python3
"""numpy_kvstore: a training program of your own in Python on Cohort's kvstore, numpy only.
Each worker fits y = w.x + b on its own synthetic samples; the shards average the workers'
gradients (summed in rank order) and run SGD.

    bazel build //python:cohort
    PYTHONPATH=$PWD/bazel-bin/python bazel run //tools:launch -- -n 2 -s 2 -- \\
        python3 $PWD/examples/numpy_kvstore.py [--steps 200]

The launcher hands the job over in COHORT_* variables; cohort.kvstore.create reads them.
"""

import argparse
import sys

import numpy as np

import cohort

FEATURES, BATCH = 8, 32
TRUE_W = 0.5 * np.arange(FEATURES, dtype=np.float32) - 1.0
TRUE_B = 0.75


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--kv_store", default="dist_sync")
    args = parser.parse_args()

    kv = cohort.kvstore.create(args.kv_store)
    # The shards average the workers' gradients of each step (summed in rank order, × 1/W).
    kv.set_optimizer("sgd", lr=0.1, steps_per_epoch=args.steps)
    w = np.zeros(FEATURES, np.float32)
    b = np.zeros(1, np.float32)
    kv.init(0, w)
    kv.init(1, b)
    kv.pull(0, out=w)
    kv.pull(1, out=b)

    rng = np.random.default_rng(1234 + kv.rank)  # each worker its own samples
    gw, gb = np.empty_like(w), np.empty_like(b)
    for _ in range(args.steps):
        x = rng.standard_normal((BATCH, FEATURES), dtype=np.float32)
        y = x @ TRUE_W + TRUE_B
        err = x @ w + b[0] - y
        loss = 0.5 * float(np.mean(err * err))
        gw[:] = x.T @ err / BATCH
        gb[0] = np.mean(err)
        # Split-phase: both keys' exchanges run at once; each array is the kvstore's until its
        # wait() returns.
        handles = [kv.pushpull(0, gw, out=w), kv.pushpull(1, gb, out=b)]
        for h in handles:
            h.wait()
    kv.barrier()
    distance = float(np.sqrt(np.sum((w - TRUE_W) ** 2) + (b[0] - TRUE_B) ** 2))
    print(f"rank {kv.rank} of {kv.num_workers}: last batch loss {loss:.6f}, "
          f"|(w, b) - truth| {distance:.6f}, w[1] {w[1]:.7f}", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except cohort.Error as e:
        print(f"numpy_kvstore: error: {e}", file=sys.stderr)
        sys.exit(1)
