"""Checkpoint files written off the event loop.

A checkpoint write fsyncs a file and its directory. Under a heavy write load one fsync can
wait for a journal commit that flushes every dirty page of the disk: hundreds of
milliseconds. Done on the event loop, the periodic checkpoint pass froze request handling
that long (p99 produce latency 316 ms at 270,000 records/s, 17 ms without the pass), so
the broker hands the writes to one background thread, as Kafka's scheduler threads write
its checkpoint files away from the request handlers.

The thread runs jobs in submission order. What a job writes is captured on the event loop
when it is submitted; :class:`pydmq.storage.log.UnifiedLog` numbers its checkpoint writes
so that a queued write never replaces a newer one of the same file.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

__all__ = ["CheckpointWriter"]

log = logging.getLogger(__name__)

_Job = Callable[[], None]


class CheckpointWriter:
    """One daemon thread running checkpoint jobs in order; ``barrier()`` awaits the queue."""

    def __init__(self, name: str = "pydmq-checkpoints") -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._stopped = False

    def submit(self, job: _Job) -> None:
        if self._stopped:
            raise RuntimeError("checkpoint writer stopped")
        self._jobs.put(job)

    def barrier(self) -> Future[None]:
        """A future done once every job submitted before it has run."""
        done: Future[None] = Future()
        self.submit(lambda: done.set_result(None))
        return done

    async def drain(self) -> None:
        await asyncio.wrap_future(self.barrier())

    def stop(self, timeout: float = 30.0) -> None:
        """Run what is queued, then end the thread (bounded by ``timeout``)."""
        if self._stopped:
            return
        self._stopped = True
        self._jobs.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("checkpoint write failed")
