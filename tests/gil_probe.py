#!/usr/bin/python3
"""A worker for python_job_test: rank 1 comes to the barrier 1.5 s late; while rank 0 waits
there, another Python thread of rank 0 counts. Prints how long the barrier took and how far
the thread counted meanwhile: far when the wait released the GIL, hardly at all otherwise."""

import threading
import time

import numpy as np

import cohort

kv = cohort.kvstore.create("dist_sync")
kv.set_optimizer("sgd", lr=0.1)
kv.init(0, np.zeros(4, np.float32))
kv.pull(0, np.zeros(4, np.float32))
if kv.rank == 1:
    time.sleep(1.5)
counts = {"before": 0, "during": 0}
phase = "before"
stop = False


def spin():
    while not stop:
        counts[phase] += 1


thread = threading.Thread(target=spin, daemon=True)
thread.start()
time.sleep(0.2)
phase = "during"
start = time.monotonic()
kv.barrier()
waited = time.monotonic() - start
stop = True
thread.join()
print(f"rank {kv.rank}: barrier {waited:.2f} s, counted {counts['during']} meanwhile", flush=True)
