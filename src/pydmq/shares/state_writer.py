"""Writes of share-partition state, one share-partition at a time, the latest state winning.

A partition leader changes a share-partition's state on every acknowledgement, release and
lock expiry, and each change is a whole snapshot. :class:`StateWriter` keeps at most one write
per share-partition in flight (to its share coordinator, through the
:class:`~pydmq.shares.persister.SharePersister`): changes made meanwhile are coalesced into the
next write, which carries the latest snapshot. So writes of one share-partition are never
reordered, and a burst of acknowledgements costs one round trip more, not one each.

:meth:`StateWriter.waiters` (taken in the turn of the loop that made the changes) and
:meth:`StateWriter.flush` wait until every change made before the call is written (or failed)
and give each share-partition's error code: a request is answered only once what it changed
is persisted. A write fenced by the coordinator (a newer leader, or offsets altered) reports it
to ``on_fenced`` so the share-partition is reloaded. Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from pydmq.protocol.errors import ErrorCode
from pydmq.shares.generated_records import ShareSnapshotValue
from pydmq.shares.state_log import StateKey

__all__ = ["StateWriter"]

log = logging.getLogger(__name__)

_FENCED = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH})

Write = Callable[[StateKey, ShareSnapshotValue | None], Awaitable[int]]
"""Writes a snapshot (None: deletes the state); the error code."""


class _KeyWrites:
    __slots__ = ("changed", "error", "latest", "task", "waiters", "written")

    def __init__(self) -> None:
        self.latest: ShareSnapshotValue | None = None
        self.changed = 0  # generation of the latest change
        self.written = 0  # generation of the last write that completed
        self.error: int = ErrorCode.NONE
        self.task: asyncio.Task[None] | None = None
        self.waiters: list[tuple[int, asyncio.Future[int]]] = []


class StateWriter:
    """Coalesced, ordered writes of share-partition state (see the module)."""

    def __init__(self, write: Write, on_fenced: Callable[[StateKey, int], None]) -> None:
        self._write = write
        self._on_fenced = on_fenced
        self._keys: dict[StateKey, _KeyWrites] = {}

    def write(self, key: StateKey, snapshot: ShareSnapshotValue | None) -> None:
        """Persist ``snapshot`` as the state of ``key`` (after any write in flight)."""
        writes = self._keys.get(key)
        if writes is None:
            writes = self._keys[key] = _KeyWrites()
        writes.latest = snapshot
        writes.changed += 1
        if writes.task is None:
            writes.task = asyncio.get_running_loop().create_task(self._run(key, writes))

    def pending(self, key: StateKey) -> bool:
        return key in self._keys

    def waiters(self, keys: Iterable[StateKey]) -> dict[StateKey, asyncio.Future[int]]:
        """Futures of the changes of ``keys`` made so far (of those with changes pending),
        each resolved with its write's error code. Call it in the same turn of the loop as
        the change: a write that completes before is no longer pending."""
        loop = asyncio.get_running_loop()
        waits: dict[StateKey, asyncio.Future[int]] = {}
        for key in keys:
            writes = self._keys.get(key)
            if writes is None or key in waits:
                continue
            future: asyncio.Future[int] = loop.create_future()
            writes.waiters.append((writes.changed, future))
            waits[key] = future
        return waits

    async def flush(self, keys: Iterable[StateKey]) -> dict[StateKey, int]:
        """Wait for the changes of ``keys`` made so far; the error code of each."""
        return {key: await future for key, future in self.waiters(keys).items()}

    async def _run(self, key: StateKey, writes: _KeyWrites) -> None:
        try:
            while writes.written < writes.changed:
                generation, snapshot = writes.changed, writes.latest
                try:
                    code = await self._write(key, snapshot)
                except Exception:
                    log.exception("writing the share state of %s failed", key)
                    code = ErrorCode.UNKNOWN_SERVER_ERROR
                writes.written, writes.error = generation, code
                if code in _FENCED:
                    self._on_fenced(key, code)
                self._settle(writes, generation, code)
                if code:
                    break  # later changes build on a state the coordinator refused
        finally:
            self._settle(writes, writes.changed, writes.error)
            writes.task = None
            if self._keys.get(key) is writes:
                del self._keys[key]

    @staticmethod
    def _settle(writes: _KeyWrites, generation: int, code: int) -> None:
        kept = []
        for wanted, future in writes.waiters:
            if wanted <= generation:
                if not future.done():
                    future.set_result(code)
            else:
                kept.append((wanted, future))
        writes.waiters = kept
