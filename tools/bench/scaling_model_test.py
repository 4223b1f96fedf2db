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
        self.assertAlmostEqual(scaling_model.heartbeat_interval(1088), 2.176)
        self.assertAlmostEqual(scaling_model.heartbeat_timeout(1088), 6.528)
        self.assertEqual(scaling_model.heartbeat_timeout(10), 3.0)
        self.assertEqual(scaling_model.heartbeat_interval(1088, timeout_s=3), 1.0)
        self.assertEqual(scaling_model.heartbeat_interval(4160), 5.0)
        self.assertAlmostEqual(scaling_model.heartbeat_interval(2, timeout_s=0.3), 0.1)

    def test_1024_workers_cost_what_member_sim_measured(self):
        interval, cpu, start, barrier, heard, timeout = scaling_model.control_plane(1024, 64)
        self.assertAlmostEqual(interval, 2.176)
        # member_sim at 1,024 workers and 64 shards: 9.4% of a core, RUNNING at 1.36 s, a
        # barrier's p50 64 ms, every worker in a new generation 0.11 s after a death.
        self.assertAlmostEqual(cpu, 0.094, delta=0.005)
        self.assertAlmostEqual(start, 1.36, delta=0.05)
        self.assertAlmostEqual(barrier, 0.064, delta=0.005)
        self.assertAlmostEqual(heard, 0.11, delta=0.01)


if __name__ == "__main__":
    unittest.main()
