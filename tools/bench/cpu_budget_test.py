#!/usr/bin/python3
"""Tests for cpu_budget.py's reading of `perf sched timehist`."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_budget  # noqa: E402

# Lines as perf 6.x prints them: a main thread ([pid]), other threads ([tid/pid]), idle, and a
# name with spaces.
TIMEHIST = """\
           time    cpu  task name                       wait time  sch delay   run time
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------
    4561.363274 [0001]  worker[22160]                       0.759      0.000      2.218
    4561.363329 [0001]  nexting_thread[22243/22161]         1.760      0.830      0.031
    4561.363637 [0000]  worker[22248/22160]                13.242      0.168      0.247
    4561.364468 [0000]  shard[22180/22159]                  5.640      0.115      0.050
    4561.367713 [0000]  <idle>                              9.237      0.000      2.964
    4561.368125 [0000]  nexting_thread[22171/22159]         3.043      0.110      0.369
    4561.362332 [0001]  VM Periodic Tas[5953/5935]         50.113      0.029      0.036
    4561.371521 [0001]  worker[22160]                       5.894      0.000      1.000
    4561.371600 [0000]  grpc_global_tim[1234567/1234560     0.100      0.000      0.500
    4561.371700 [0000]  ???                                 0.100      0.000      0.700
    4561.371800 [0001]  :-1[-1/22159]                       0.000      0.000      0.215
"""


class ParseTest(unittest.TestCase):
    def test_reads_names_ids_and_run_times(self):
        runs, unread = cpu_budget.parse_timehist(TIMEHIST.splitlines())
        self.assertEqual(len(runs), 10)  # the header lines are skipped
        self.assertEqual(runs[0], ("worker", 22160, 22160, 0.002218))
        self.assertEqual(runs[1], ("nexting_thread", 22243, 22161, 0.000031))
        self.assertEqual(runs[4][:3], ("<idle>", None, None))
        self.assertEqual(runs[6][:3], ("VM Periodic Tas", 5953, 5935))
        # Cut at 31 characters, without its "]": still that thread, not idle.
        self.assertEqual(runs[8], ("grpc_global_tim", 1234567, 1234560, 0.0005))
        self.assertEqual(unread, 1)  # "???" names no thread: counted, left out
        # A thread perf could not name still counts for its process.
        self.assertEqual(runs[9], (":-1", -1, 22159, 0.000215))

    def test_budget_by_role_and_thread(self):
        runs, _ = cpu_budget.parse_timehist(TIMEHIST.splitlines())
        totals = cpu_budget.budget(runs, {22160: "worker", 22161: "worker", 22159: "shard"})
        self.assertAlmostEqual(totals[("worker", "main")], 0.003218)
        # A worker's other thread keeps its own name, whatever it is.
        self.assertAlmostEqual(totals[("worker", "worker")], 0.000247)
        self.assertAlmostEqual(totals[("worker", "nexting_thread")], 0.000031)
        self.assertAlmostEqual(totals[("shard", "nexting_thread")], 0.000369)
        self.assertAlmostEqual(totals[("shard", "shard")], 0.000050)
        self.assertAlmostEqual(totals[("shard", ":-1")], 0.000215)
        self.assertAlmostEqual(totals[("idle", "")], 0.002964)
        self.assertAlmostEqual(totals[("other", "")], 0.000536)  # not the job's threads


if __name__ == "__main__":
    unittest.main()
