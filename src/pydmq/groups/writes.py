"""GroupWrites: the group coordinator's writes to its shards, and the wait for their commit.

A write is an operation of the group's ``__consumer_offsets`` shard on the
:class:`~pydmq.coordinator.runtime.CoordinatorRuntime`. A write the log commits at append time
(a single node) is done when it is scheduled; one that is not (cluster mode, acks=-1) is
remembered per group, so a handler can take :attr:`GroupWrites.write_mark` before serving a
request and then await what the request wrote (:meth:`GroupWrites.await_writes`).
Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pydmq.coordinator.api import CoordinatorError
from pydmq.coordinator.runtime import CoordinatorRuntime, WriteOperation
from pydmq.groups.errors import coordinator_error
from pydmq.groups.shard import GroupCoordinatorShard, GroupRecord
from pydmq.protocol.errors import ErrorCode

__all__ = ["GroupWrites"]

log = logging.getLogger(__name__)

R = TypeVar("R")


async def _committed() -> int:
    return ErrorCode.NONE


def _retrieve_failure(write: asyncio.Future[Any]) -> None:
    """A write's failure is answered by :meth:`GroupWrites.await_writes` when a request waits
    for it; retrieved here so that none is reported as never retrieved."""
    if not write.cancelled():
        write.exception()


class GroupWrites:
    """Writes of groups to their shards and the uncommitted ones, by group id."""

    __slots__ = ("_partition_for", "_pending", "_runtime", "_seq")

    def __init__(
        self,
        runtime: CoordinatorRuntime[GroupCoordinatorShard, GroupRecord],
        partition_for: Callable[[str], int],
    ) -> None:
        self._runtime = runtime
        self._partition_for = partition_for
        self._seq = 0
        self._pending: dict[str, tuple[int, asyncio.Future[Any]]] = {}

    def write(
        self,
        group_id: str,
        operation: WriteOperation[GroupCoordinatorShard, R],
        *,
        key: str | None = None,
        producer: tuple[int, int] | None = None,
    ) -> asyncio.Future[R]:
        """Run ``operation`` on the group's shard (a keyed write with ``key``; a
        transactional write of ``producer``, its id and epoch). Raises
        :class:`CoordinatorError` when it failed at once (nothing appended)."""
        future = self.schedule(group_id, operation, key=key, producer=producer)
        if future.done():
            error = future.exception()
            if error is not None:
                raise error
        return future

    def schedule(
        self,
        group_id: str,
        operation: WriteOperation[GroupCoordinatorShard, R],
        *,
        key: str | None = None,
        producer: tuple[int, int] | None = None,
    ) -> asyncio.Future[R]:
        """Schedule ``operation`` on the group's shard (a transactional write of
        ``producer``, its id and epoch); a write not done yet is remembered for
        :meth:`await_writes`."""
        partition = self._partition_for(group_id)
        if producer is None:
            future = self._runtime.schedule_write(partition, operation, key=key)
        else:
            future = self._runtime.schedule_transactional_write(
                partition, producer[0], producer[1], operation, key=key
            )
        if not future.done():
            self._seq += 1
            self._pending[group_id] = (self._seq, future)
            future.add_done_callback(_retrieve_failure)
        return future

    @property
    def write_mark(self) -> int:
        """Taken before serving a request; :meth:`await_writes` then waits for what the
        request wrote."""
        return self._seq

    def wrote_since(self, group_id: str, mark: int) -> bool:
        """True when records of ``group_id`` written since ``mark`` may be uncommitted (never
        in single-node mode: handlers then answer without awaiting)."""
        entry = self._pending.get(group_id)
        return entry is not None and entry[0] > mark

    def await_writes(
        self, group_id: str, mark: int, *, offsets: bool = False
    ) -> Coroutine[Any, Any, int]:
        """An awaitable of the commit of what was written for ``group_id`` since ``mark``:
        NONE, or the error a group API answers (NOT_COORDINATOR on a resignation meanwhile).
        Call it right after serving the request (it picks the write to wait for then)."""
        entry = self._pending.get(group_id)
        if entry is None or entry[0] <= mark:
            return _committed()
        return _await_commit(group_id, entry[1], offsets=offsets)

    def forget(self, selected: Callable[[str], bool]) -> None:
        """Drop the writes of the groups ``selected`` picks (their shard was unloaded: the
        runtime failed those writes already)."""
        for group_id in [g for g in self._pending if selected(g)]:
            del self._pending[group_id]


async def _await_commit(group_id: str, write: asyncio.Future[Any], *, offsets: bool) -> int:
    try:
        await asyncio.shield(write)
    except CoordinatorError as exc:
        return coordinator_error(exc.error_code, offsets=offsets)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("waiting for the commit of group %s records failed", group_id)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE
