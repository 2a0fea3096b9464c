"""EventLoopLagProbe: how late the node's event loop runs a timer (its lag).

A task sleeps ``interval`` seconds and measures how much later than asked it woke: the time
some callback held the loop (a GC pause, a large request handled inline). The last value and
a histogram of all of them are read by ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib

from pydmq.api.request_metrics import LatencyHistogram

__all__ = ["EventLoopLagProbe"]


class EventLoopLagProbe:
    """Owned by the node's HTTP service; its task runs on the node's event loop."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.last_lag = 0.0
        self.lags = LatencyHistogram()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="event-loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.interval)
            lag = max(0.0, loop.time() - before - self.interval)
            self.last_lag = lag
            self.lags.observe(lag)
