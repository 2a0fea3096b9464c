"""Offset commits stay invisible until their append is committed (Kafka's pending commits).

Found by the chaos harness: a coordinator cut off from its followers applied commits it
could not replicate; OffsetFetch showed them, then its successor did not have them and the
group's committed offsets went backwards.
"""

from __future__ import annotations

import asyncio

from pydmq.groups.offsets import OffsetAndMetadata, OffsetStore
from pydmq.protocol.errors import ErrorCode


def _store_with_pending_appends() -> tuple[OffsetStore, list[asyncio.Future[int]]]:
    """A store whose appends commit only when the test settles their futures."""
    futures: list[asyncio.Future[int]] = []

    def append(group: str, records: list[tuple[bytes, bytes | None]]) -> asyncio.Future[int]:
        futures.append(asyncio.get_running_loop().create_future())
        return futures[-1]

    return OffsetStore(append), futures


def _om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 0)


def test_commit_applied_only_once_its_append_commits() -> None:
    async def scenario() -> None:
        store, futures = _store_with_pending_appends()
        store.commit("g", {("t", 0): _om(10)})
        assert store.get("g", "t", 0) is None
        assert store.pending("g") == {("t", 0)}
        futures[0].set_result(ErrorCode.NONE)
        await asyncio.sleep(0)
        got = store.get("g", "t", 0)
        assert got is not None and got.offset == 10
        assert store.pending("g") == set()

    asyncio.run(scenario())


def test_failed_append_is_never_applied() -> None:
    async def scenario() -> None:
        store, futures = _store_with_pending_appends()
        store.commit("g", {("t", 0): _om(5)})
        futures[0].set_result(ErrorCode.NONE)
        await asyncio.sleep(0)
        store.commit("g", {("t", 0): _om(9)})
        futures[1].set_result(ErrorCode.REQUEST_TIMED_OUT)
        await asyncio.sleep(0)
        got = store.get("g", "t", 0)
        assert got is not None and got.offset == 5
        assert store.pending("g") == set()

    asyncio.run(scenario())


def test_an_older_commit_settling_late_never_overwrites_a_newer_one() -> None:
    async def scenario() -> None:
        store, futures = _store_with_pending_appends()
        store.commit("g", {("t", 0): _om(1), ("t", 1): _om(100)})
        store.commit("g", {("t", 0): _om(2)})
        futures[1].set_result(ErrorCode.NONE)
        await asyncio.sleep(0)
        futures[0].set_result(ErrorCode.NONE)
        await asyncio.sleep(0)
        t0, t1 = store.get("g", "t", 0), store.get("g", "t", 1)
        assert t0 is not None and t0.offset == 2
        assert t1 is not None and t1.offset == 100

    asyncio.run(scenario())


def test_unloaded_group_drops_its_pending_commits() -> None:
    async def scenario() -> None:
        store, futures = _store_with_pending_appends()
        store.commit("g", {("t", 0): _om(7)})
        store.unload(lambda group: group == "g")
        futures[0].set_result(ErrorCode.NONE)
        await asyncio.sleep(0)
        assert store.get("g", "t", 0) is None

    asyncio.run(scenario())


def test_committed_at_once_is_applied_at_once() -> None:
    store = OffsetStore(lambda group, records: None)
    store.commit("g", {("t", 0): _om(3)})
    got = store.get("g", "t", 0)
    assert got is not None and got.offset == 3
