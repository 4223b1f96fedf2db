#!/usr/bin/python3
"""The cohort package on the local kvstore: values land in the caller's own memory; an array
handed to pushpull stays the kvstore's (its memory held in place) until wait(); numpy arrays
and CPU torch tensors both work; wrong dtypes, shapes, layouts and non-arrays are cohort.Error
naming the key and what to do. hvd.elastic's state, sampler and run() on a job of one; the
DistributedOptimizer there (fp16, bf16 and float32 tensors step as torch's; gradients copied
from a GPU pushed in order, each once its copy is done).
cohortrun's options become the launcher's command line.
Usage: cohort_test.py PATH/TO/cohort/__init__.py
"""

import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))))
import cohort  # noqa: E402
from cohort import run  # noqa: E402

try:
    import torch
except ImportError:  # python3-torch is optional for the numpy cases
    torch = None


def address(a):
    return a.__array_interface__["data"][0]


class KVStoreTest(unittest.TestCase):
    def setUp(self):
        self.kv = cohort.kvstore.create("local")
        self.kv.set_optimizer("sgd", lr=0.5)
        self.kv.init(7, np.arange(6, dtype=np.float32).reshape(2, 3))

    def test_a_pulled_value_lands_in_the_callers_buffer(self):
        out = np.zeros((2, 3), np.float32)
        where = address(out)
        self.kv.pull(7, out)
        self.assertEqual(address(out), where)
        np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3))
        # A view into a bigger array: the rows it covers, nothing else.
        big = np.full((4, 3), -1, np.float32)
        self.kv.pull(7, big[1:3])
        np.testing.assert_array_equal(big[0], [-1, -1, -1])
        np.testing.assert_array_equal(big[1:3], np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(big[3], [-1, -1, -1])

    def test_pushpull_holds_the_arrays_memory_until_wait(self):
        grad_bytes, out_bytes = bytearray(24), bytearray(24)
        grad = memoryview(grad_bytes).cast("B").cast("f", (2, 3))
        out = memoryview(out_bytes).cast("B").cast("f", (2, 3))
        np.asarray(grad)[:] = 1
        handle = self.kv.pushpull(7, grad, out)
        del grad, out  # only the kvstore holds the memory now
        with self.assertRaises(BufferError):
            grad_bytes.append(0)  # a bytearray cannot move while its memory is exported
        with self.assertRaises(BufferError):
            out_bytes.append(0)
        with self.assertRaisesRegex(cohort.Error, "key 7: a pushpull is in flight"):
            self.kv.pushpull(7, np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32))
        handle.wait()
        grad_bytes.append(0)
        out_bytes.append(0)
        np.testing.assert_array_equal(np.frombuffer(out_bytes[:24], np.float32),
                                      np.arange(6) - 0.5)
        # numpy arrays, taken by their address, are held too: numpy moves none another holds.
        grad, out = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
        handle = self.kv.pushpull(7, grad, out)
        with self.assertRaisesRegex(ValueError, "cannot resize"):
            out.resize(12)
        handle.wait()
        out.resize(12)  # let go

    def test_errors_name_the_key_and_what_to_do(self):
        cases = [
            (np.zeros((2, 3)), "key 7: the output holds float64; the kvstore holds float32"),
            (np.zeros((3, 2), np.float32).T, "key 7: the output of shape \\(2, 3\\) is not "
                                             "C-contiguous .*np.ascontiguousarray"),
            (np.zeros((3, 3), np.float32), "pull of key 7: F32 \\(3, 3\\), the key holds F32 "
                                           "\\(2, 3\\)"),
            ([0.0] * 6, "key 7: the output is a list, not an array"),
        ]
        for out, message in cases:
            with self.assertRaisesRegex(cohort.Error, message):
                self.kv.pull(7, out)
        read_only = np.zeros((2, 3), np.float32)
        read_only.flags.writeable = False
        with self.assertRaisesRegex(cohort.Error, "key 7: the output is not a writable array"):
            self.kv.pull(7, read_only)
        with self.assertRaisesRegex(cohort.Error, "pull of key 8 before its init"):
            self.kv.pull(8, np.zeros(1, np.float32))
        with self.assertRaisesRegex(cohort.Error, "lr_schedule|schedule"):
            self.kv.set_optimizer("sgd", lr_schedule="sometimes")
        self.assertTrue(issubclass(cohort.Error, RuntimeError))

    @unittest.skipIf(torch is None, "needs Debian's python3-torch")
    def test_torch_tensors_are_read_and_written_in_place(self):
        out = torch.zeros(2, 3)
        where = out.data_ptr()
        self.kv.pushpull(7, torch.ones(2, 3), out).wait()
        self.assertEqual(out.data_ptr(), where)
        torch.testing.assert_close(out, torch.arange(6.0).reshape(2, 3) - 0.5)
        with self.assertRaisesRegex(cohort.Error, "not C-contiguous"):
            self.kv.pull(7, torch.zeros(3, 2).t())
        with self.assertRaisesRegex(cohort.Error, "a torch.bfloat16 tensor: the kvstore takes "
                                                   "float32 \\(convert with .float\\(\\)"):
            self.kv.pull(7, torch.zeros(2, 3, dtype=torch.bfloat16))


    def test_a_local_store_is_its_own_generation(self):
        rank, hosts = self.kv.worker_hosts()
        self.assertEqual((rank, len(hosts)), (0, 1))
        self.assertFalse(self.kv.workers_changed)
        self.assertEqual(self.kv.gradient_compression, "none")
        self.kv.recover()
        self.assertEqual(self.kv.start_step(), 0)


@unittest.skipIf(torch is None, "needs python3-torch")
class ElasticStateTest(unittest.TestCase):
    """hvd.elastic on a job of one (the local store): what a commit keeps, what the sampler
    still owes, and what run() retries and what it raises."""

    def setUp(self):
        import cohort.torch as hvd
        hvd.init(kv_store="local")
        self.hvd = hvd

    def test_the_sampler_goes_on_with_the_samples_not_recorded(self):
        elastic = self.hvd.elastic
        sampler = elastic.ElasticSampler(list(range(10)), seed=3)
        first = list(sampler)
        self.assertEqual(sorted(first), list(range(10)))
        sampler.record_batch(0, 4)
        again = elastic.ElasticSampler(list(range(10)), seed=3)
        again.load_state_dict(sampler.state_dict())
        rest = list(again)
        self.assertEqual(len(again), 6)
        self.assertEqual(sorted(rest + first[:4]), list(range(10)))
        again.set_epoch(1)
        self.assertEqual(sorted(again), list(range(10)))
        self.assertNotEqual(list(again), first)  # another epoch, another order

    def test_restore_goes_back_to_the_last_commit(self):
        model = torch.nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        state = self.hvd.elastic.TorchState(model, optimizer, epoch=0)
        before = model.weight.detach().clone()
        model(torch.ones(1, 3)).sum().backward()
        optimizer.step()
        state.epoch = 3
        state.restore()
        self.assertTrue(torch.equal(model.weight, before))
        self.assertEqual(state.epoch, 0)
        self.assertEqual(optimizer.state_dict()["state"], {})
        optimizer.step()
        state.epoch = 1
        state.commit()
        after = model.weight.detach().clone()
        model.weight.data.zero_()
        state.epoch = 2
        state.restore()
        self.assertTrue(torch.equal(model.weight, after))
        self.assertEqual(state.epoch, 1)

    def test_run_retries_after_a_change_of_workers_and_raises_anything_else(self):
        elastic = self.hvd.elastic
        model = torch.nn.Linear(3, 2)
        optimizer = self.hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
        state = elastic.TorchState(model, optimizer, tries=0)
        resets = []
        state.register_reset_callbacks([lambda: resets.append(state.tries)])

        @elastic.run
        def train(state):
            state.tries += 1
            if state.tries == 1:
                state.save()
                raise elastic.HostsUpdatedInterrupt()
            return state.tries

        self.assertEqual(train(state), 2)
        self.assertEqual(resets, [1])

        @elastic.run
        def wrong(state):
            raise cohort.Error("a mistake of the program's")

        with self.assertRaisesRegex(cohort.Error, "a mistake of the program's"):
            wrong(state)

        on_the_shards = torch.optim.SGD(model.parameters(), lr=0.1)
        on_the_shards.server_optimizer = True  # as DistributedOptimizer(server_optimizer=True)
        with self.assertRaisesRegex(cohort.Error, "server_optimizer=True"):
            elastic.TorchState(model, on_the_shards)


@unittest.skipIf(torch is None, "needs python3-torch")
class DistributedOptimizerTest(unittest.TestCase):
    """The DistributedOptimizer on a job of one (the local store): what it does to tensors of
    each dtype, and the order in which gradients copied from a GPU are pushed."""

    def setUp(self):
        import cohort.torch as hvd
        hvd.init(kv_store="local")
        self.hvd = hvd

    def test_fp16_and_bf16_parameters_step_as_torch_does(self):
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            torch.manual_seed(5)
            x = torch.randn(8, 4).to(dtype)
            mine = torch.nn.Parameter(torch.randn(8, 4).to(dtype))
            torchs = torch.nn.Parameter(mine.detach().clone())
            start = mine.detach().clone()
            optimizer = self.hvd.DistributedOptimizer(
                torch.optim.SGD([mine], lr=0.25, momentum=0.5))
            reference = torch.optim.SGD([torchs], lr=0.25, momentum=0.5)
            for _ in range(3):
                for w, o in ((mine, optimizer), (torchs, reference)):
                    o.zero_grad()
                    (w * x).square().mean().backward()  # (CPU torch has no fp16 matmul)
                    o.step()
            # The mean of one rank's gradient is that gradient, through float32 and back.
            self.assertEqual(mine.dtype, dtype)
            self.assertFalse(torch.equal(mine, start))
            self.assertTrue(torch.equal(mine, torchs), f"{dtype}: {mine} != {torchs}")

    def test_copied_gradients_are_pushed_once_their_copies_are_done_in_order(self):
        class Copy:  # a copy's event: done once told
            def __init__(self):
                self.done = False

            def query(self):
                return self.done

            def synchronize(self):
                self.done = True

        pushed = []
        from cohort.host_copies import HostCopies
        copies = HostCopies(pushed.append)
        events = [Copy() for _ in range(4)]
        for i, event in enumerate(events):
            copies.add(i, event)
        copies.push_done()
        self.assertEqual(pushed, [])  # none copied yet
        events[1].done = True
        copies.push_done()
        self.assertEqual(pushed, [])  # 1 is copied, but 0 goes first
        events[0].done = True
        copies.push_done()
        self.assertEqual(pushed, [0, 1])
        copies.push_done(wait=True)
        self.assertEqual(pushed, [0, 1, 2, 3])
        self.assertTrue(all(e.done for e in events))


class CohortrunTest(unittest.TestCase):
    def test_horovod_and_torchrun_options_become_the_launchers(self):
        launch = "/nowhere/bin/launch"
        self.assertEqual(run.launch_command(["-np", "4", "python", "train.py", "-n", "3"], launch),
                         [launch, "-n", "4", "--", sys.executable, "train.py", "-n", "3"])
        self.assertEqual(
            run.launch_command(["--nproc-per-node", "2", "-H", "a,b:3", "--shard_replicas=2",
                                "python", "t.py"], launch),
            [launch, "-n", "4", "-H", "a:2,b:2", "--shard_replicas=2", "--", sys.executable,
             "t.py"])
        self.assertEqual(run.launch_command(["--nproc_per_node=3", "-s", "1", "t"], launch),
                         [launch, "-n", "3", "-s", "1", "--", "t"])
        self.assertEqual(run.launch_command(["-np", "3", "--min-np", "2", "--max-np=4",
                                             "--checkpoint_every=5", "t"], launch),
                         [launch, "-n", "3", "--on_worker_failure=elastic", "--min_workers=2",
                          "--max_workers=4", "--checkpoint_every=5", "--", "t"])

    def test_wrong_options_are_said(self):
        for argv, said in ((["-np", "x", "t"], "-np x: a number of processes"),
                           (["--verbose", "t"], "unknown option --verbose"),
                           (["-np", "2"], "no program to run"),
                           (["-np", "2", "--min-np", "0", "t"], "--min-np 0: a number"),
                           (["python", "t.py"], "how many workers?"),
                           (["--hostfile", "/no/such", "t"], "--hostfile /no/such: no such file")):
            with self.assertRaises(run.UsageError) as e:
                run.launch_command(argv, "/nowhere/bin/launch")
            self.assertIn(said, str(e.exception))


if __name__ == "__main__":
    unittest.main()
