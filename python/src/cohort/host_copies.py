"""The copies of a DistributedOptimizer's CUDA gradients into pinned host memory, and the pushes
that wait for them (cohort.torch)."""

import collections

import torch


class HostCopies:
    """The copies of CUDA gradients into pinned host memory, on a stream of their own (one per
    device), and the pushes that wait for them. Each copy starts as autograd produces its
    gradient, so backward goes on meanwhile; each push starts once its copy is done (as a later
    gradient comes, or at synchronize()). One stream finishes its copies in the order they
    started, so they are pushed in that order."""

    def __init__(self, push):
        self._push = push  # push(i): starts the exchange of parameter i's copied gradient
        self._in_flight = collections.deque()  # (i, the event its copy records when done)
        self._streams = {}  # device: its copy stream

    def start(self, i, grad, host):
        """Copies grad (a CUDA tensor of any floating dtype) into host (pinned float32)."""
        stream = self._streams.get(grad.device)
        if stream is None:
            stream = self._streams[grad.device] = torch.cuda.Stream(grad.device)
        stream.wait_stream(torch.cuda.current_stream(grad.device))  # where grad was made
        with torch.cuda.stream(stream):
            host.copy_(grad, non_blocking=True)
            grad.record_stream(stream)  # its memory is not reused before the copy read it
            done = torch.cuda.Event()
            done.record(stream)
        self.add(i, done)

    def add(self, i, done):
        """A copy in flight: done has query() (whether it is) and synchronize() (waits)."""
        self._in_flight.append((i, done))

    def drop(self):
        """Forgets the copies in flight (the workers regrouped); their streams stay, so a new
        copy into the same memory comes after them."""
        self._in_flight.clear()

    def push_done(self, wait=False):
        """Pushes each gradient whose copy is done; with wait, every one, waiting for its
        copy."""
        while self._in_flight and (wait or self._in_flight[0][1].query()):
            i, done = self._in_flight.popleft()
            done.synchronize()
            self._push(i)
