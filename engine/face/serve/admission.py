"""The bounded queue in front of the answering threads, and the per-request deadline.

`workers` answers run at once in a thread pool of that size (1 for the local model: its calls
are serialized anyway, and a second answer would only wait on its lock; N for a remote
endpoint). At most `queue_size` more requests wait for a thread; one more is refused at once
with 503 and a Retry-After estimate, instead of a backlog that grows without bound.

A request's deadline counts from its arrival: queue wait plus answer. A thread cannot be
killed, so a request past its deadline is answered 504 while its thread runs on to the end
of its LLM call (the answer's Budget(max_seconds) stops it from starting more); its slot is
given back when the thread ends, so the queue bound stays true.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from engine.face.serve.errors import DeadlineExceeded, ServerBusy

T = TypeVar("T")


class Admission:
    def __init__(self, workers: int, queue_size: int, estimate_seconds: Callable[[], float] = lambda: 1.0):
        self.workers = workers
        self.queue_size = queue_size
        self.estimate_seconds = estimate_seconds
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="logicroute-answer")
        self._lock = threading.Lock()
        self._admitted = 0  # running + waiting
        self._running = 0
        self.refused = 0
        self.timed_out = 0

    def state(self) -> dict:
        with self._lock:
            running = self._running
            admitted = self._admitted
        return {
            "workers": self.workers,
            "running": running,
            "waiting": max(0, admitted - running),
            "queue_size": self.queue_size,
            "refused": self.refused,
            "timed_out": self.timed_out,
        }

    def admit(self) -> None:
        """Take a place in the queue or raise ServerBusy (503 + Retry-After). The caller must
        then `run` exactly one job, which gives the place back when its thread ends."""
        with self._lock:
            if self._admitted >= self.workers + self.queue_size:
                self.refused += 1
                waiting = self._admitted - self.workers + 1
                retry = max(1, math.ceil(self.estimate_seconds() * waiting / self.workers))
                raise ServerBusy(
                    f"the server is busy ({self.workers} answering, {self.queue_size} waiting): retry in {retry}s",
                    headers={"Retry-After": str(retry)},
                )
            self._admitted += 1

    async def run(self, job: Callable[[], T], deadline: float) -> T:
        """Run `job` on an answering thread; raise DeadlineExceeded once `deadline`
        (time.monotonic) passes, the job still holding its slot until it ends."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, self._counted, job, deadline)
        try:
            result = await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            future.add_done_callback(_consume)  # its late result or error is nobody's any more
            raise self._late() from None
        if time.monotonic() >= deadline:
            # a busy loop can see the thread's result before its own timer: past the deadline is
            # 504 either way, so the caller never gets an answer cut short by the deadline as a 200
            raise self._late()
        return result

    def _late(self) -> DeadlineExceeded:
        with self._lock:
            self.timed_out += 1
        return DeadlineExceeded("the request's deadline passed before its answer was ready")

    def _counted(self, job: Callable[[], T], deadline: float) -> T:
        with self._lock:
            if time.monotonic() >= deadline:  # waited in the queue past its deadline: its caller has gone
                self._admitted -= 1
                raise DeadlineExceeded("the request's deadline passed in the queue")
            self._running += 1
        try:
            return job()
        finally:
            with self._lock:
                self._running -= 1
                self._admitted -= 1

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
