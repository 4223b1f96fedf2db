#!/usr/bin/python3
"""A worker for python_job_test that fails as told, on rank 1 only: --raise_at=N raises
ValueError at step N (N = --steps: after its last step; -2: before it joins the job, the rank
then taken from COHORT_RANK); --exit=S exits with status S after its last step (rank 0
finishes); --sleep_at=N sleeps at step N (for the test to kill it)."""

import argparse
import os
import sys
import time

import numpy as np

import cohort

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--raise_at", type=int, default=-1)
p.add_argument("--exit", type=int, default=0)
p.add_argument("--sleep_at", type=int, default=-1)
args = p.parse_args()

if args.raise_at == -2 and os.environ.get("COHORT_RANK") == "1":
    raise ValueError("boom before joining")

kv = cohort.kvstore.create("dist_sync")
kv.set_optimizer("sgd", lr=0.1)
w = np.zeros(1000, np.float32)
kv.init(0, w)
kv.pull(0, w)
for step in range(args.steps):
    if kv.rank == 1 and step == args.raise_at:
        raise ValueError(f"boom at step {step}")
    if kv.rank == 1 and step == args.sleep_at:
        print(f"rank 1: sleeping at step {step}", flush=True)
        time.sleep(600)
    kv.pushpull(0, np.ones_like(w), out=w).wait()
print(f"rank {kv.rank}: {args.steps} steps, w[0] {w[0]}", flush=True)
if kv.rank == 1 and args.raise_at == args.steps:
    raise ValueError("boom after the last step")
if kv.rank == 1:
    sys.exit(args.exit)
