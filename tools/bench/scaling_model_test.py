#!/usr/bin/python3
"""Tests for scaling_model.py's control plane: the heartbeat interval it assumes is the
scheduler's (HeartbeatIntervalFor, whose test checks the same sizes), and the costs grow with
the members as member_sim measured them."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_model  # noqa: E402


class ControlPlaneTest(unittest.TestCase):
    def test_the_heartbeat_interval_is_the_schedulers(self):
        self.assertEqual(scaling_model.heartbeat_interval(10), 0.25)
        self.assertEqual(scaling_model.heartbeat_interval(1088), 1.0)  # a third of 3 s
        self.assertAlmostEqual(scaling_model.heartbeat_interval(1088, timeout_s=6), 1.088)
        self.assertEqual(scaling_model.heartbeat_interval(4160, timeout_s=6), 1.5)
        self.assertAlmostEqual(scaling_model.heartbeat_interval(2, timeout_s=0.3), 0.1)

    def test_1024_workers_cost_what_member_sim_measured(self):
        interval, cpu, start, barrier = scaling_model.control_plane(1024, 64)
        self.assertEqual(interval, 1.0)
        # member_sim at 1,024 workers and 64 shards: 3.8% of a core, RUNNING at 0.54 s, a
        # barrier's p50 58 ms.
        self.assertAlmostEqual(cpu, 0.038, delta=0.005)
        self.assertAlmostEqual(start, 0.54, delta=0.05)
        self.assertAlmostEqual(barrier, 0.058, delta=0.005)


if __name__ == "__main__":
    unittest.main()
